// The cold start: dependencies built once per execution environment from the validated environment,
// and rebuilt when the database refuses the credentials they were built with (a rotated secret).
import { SSMClient } from '@aws-sdk/client-ssm'
import { loadConfig, resolveSecrets, type ParameterReader } from '../../lib/config.js'
import { closeDeps, createDeps, type Deps } from '../../lib/deps.js'
import { isAuthFailure } from './auth-failure.js'
import { ssmParameterReader } from './ssm.js'

/** Where a handler gets its dependencies: the cold-start ones in Lambda, a test's or the local stack's elsewhere. */
export type DepsSource = () => Deps | Promise<Deps>

/** Dependencies built once and rebuilt when the database refuses the credentials they were built with. */
export type ColdStart = {
  deps(): Promise<Deps>
  /** After a failure: when it is the database refusing authentication, forget the deps and the secret; true if so. */
  renewAfter(error: unknown): boolean
}

/**
 * A cold start over `env` whose DATABASE_URL may come from SSM through `read`. Secrets rotation: when
 * Postgres refuses the login (SQLSTATE class 28), the URL is read again, past the cache, and the deps
 * rebuilt on the next invocation; the old pool is closed once this one is done with it.
 */
export function createColdStart(env: NodeJS.ProcessEnv, read: ParameterReader & { forget(): void }): ColdStart {
  let cached: Promise<Deps> | undefined
  return {
    deps: () => {
      cached ??= (async () => createDeps(loadConfig(await resolveSecrets(env, read))))()
      // A failed cold start must not be cached: the next invocation tries again.
      cached.catch(() => {
        cached = undefined
      })
      return cached
    },
    renewAfter: error => {
      if (!isAuthFailure(error)) return false
      const stale = cached
      cached = undefined
      read.forget()
      // Closed on the next tick: this invocation's middlewares still hold the old deps.
      stale?.then(
        deps => setImmediate(() => void closeDeps(deps)),
        () => {},
      )
      return true
    },
  }
}

let coldStart: ColdStart | undefined
// Built on first use: importing this module (tests, the local stack) reads no environment and makes no client.
const deployed = () =>
  (coldStart ??= createColdStart(
    process.env,
    ssmParameterReader(() => new SSMClient({})),
  ))

/**
 * Builds the dependencies once per cold start from the validated environment (reading DATABASE_URL
 * from SSM when the template names a parameter); a bad environment fails the cold start with every problem.
 */
export function coldStartDeps(): Promise<Deps> {
  return deployed().deps()
}

/** For the handlers: `error` ended (part of) an invocation; when Postgres refused the login, the next one re-reads the secret. */
export function renewSecretsAfter(error: unknown): boolean {
  // Only a cold start that happened has anything to renew (a test's or the local stack's deps are their own).
  return coldStart?.renewAfter(error) ?? false
}
