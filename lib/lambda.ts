import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm'
import type middy from '@middy/core'
import { loadConfig, resolveSecrets } from './config.js'
import { createDeps, type Deps } from './deps.js'
import { createCounterPusher, type CounterPusher } from './metrics-push.js'

/** Dependencies plus the per-environment metrics pusher, as each handler sees them. */
export type Runtime = { deps: Deps; pusher: CounterPusher }

/** Where a handler gets its runtime: the cold-start one in Lambda, a test's or the local stack's elsewhere. */
export type RuntimeSource = () => Runtime | Promise<Runtime>

let cached: Promise<Runtime> | undefined

/**
 * Builds the runtime once per cold start from the validated environment (reading DATABASE_URL from
 * SSM when the template names a parameter); a bad environment fails the cold start with every problem.
 */
export function lambdaRuntime(): Promise<Runtime> {
  cached ??= (async () => {
    const env = await resolveSecrets(process.env, ssmParameterReader(() => new SSMClient({})))
    const deps = createDeps(loadConfig(env))
    return { deps, pusher: createCounterPusher(deps.config, deps.metrics, deps.log) }
  })()
  // A failed cold start must not be cached: the next invocation tries again.
  cached.catch(() => { cached = undefined })
  return cached
}

/** Reads a SecureString with a client used once (cold start only). */
export function ssmParameterReader(client: () => SSMClient) {
  return async (name: string): Promise<string | undefined> => {
    const ssm = client()
    try {
      const out = await ssm.send(new GetParameterCommand({ Name: name, WithDecryption: true }))
      return out.Parameter?.Value
    } finally {
      ssm.destroy()
    }
  }
}

/** middy middleware: push this environment's counters after every invocation, success or failure. */
export function pushMetricsAfter(runtime: RuntimeSource): middy.MiddlewareObj {
  const push = async () => {
    // A failed cold start has no pusher; its error is the invocation's, not this middleware's.
    const rt = await Promise.resolve().then(runtime).catch(() => undefined)
    await rt?.pusher.push()
  }
  return { after: push, onError: push }
}
