import { GetParameterError } from '@aws-lambda-powertools/parameters/errors'
import { SSMProvider } from '@aws-lambda-powertools/parameters/ssm'
import { SSMClient } from '@aws-sdk/client-ssm'
import type middy from '@middy/core'
import type { Context } from 'aws-lambda'
import type pg from 'pg'
import { loadConfig, resolveSecrets, type ParameterReader } from '../lib/config.js'
import { closeDeps, createDeps, type Deps } from '../lib/deps.js'

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

/** Postgres refused the login (SQLSTATE class 28: invalid password, unknown role, no pg_hba entry), here or in a cause. */
function isAuthFailure(error: unknown): boolean {
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 5; depth++) {
    if ('code' in e && typeof e.code === 'string' && /^28[0-9A-Z]{3}$/.test(e.code)) return true
    e = 'cause' in e ? e.cause : undefined
  }
  return false
}

/** How long a SecureString read through Powertools stays cached in this environment (a re-read within it asks SSM nothing). */
export const SSM_CACHE_SECONDS = 300

/**
 * Reads a SecureString, decrypted, through Powertools' SSM provider, cached for SSM_CACHE_SECONDS (the
 * client is built on first use). A failed read rethrows the SDK's own error (ParameterNotFound,
 * AccessDeniedException, …), so the cold-start error names what SSM said, not Powertools' wrapper.
 */
export function ssmParameterReader(client: () => SSMClient, maxAgeSeconds = SSM_CACHE_SECONDS): ParameterReader & { forget(): void } {
  let provider: SSMProvider | undefined
  const read = async (name: string): Promise<string | undefined> => {
    provider ??= new SSMProvider({ awsSdkV3Client: client() })
    try {
      return await provider.get(name, { decrypt: true, maxAge: maxAgeSeconds })
    } catch (error) {
      throw error instanceof GetParameterError && error.cause !== undefined ? error.cause : error
    }
  }
  // A rotated secret: the next read goes to SSM whatever the cache's age.
  return Object.assign(read, { forget: () => provider?.clearCache() })
}

/**
 * This invocation's view of the cold-start dependencies: every line its logger writes (EMF lines
 * included) carries the Lambda request id, so an on-call can group one invocation's lines.
 */
export function forInvocation(deps: Deps, context: Pick<Context, 'awsRequestId'>): Deps {
  return { ...deps, log: deps.log.child({ awsRequestId: context.awsRequestId }) }
}

/**
 * middy middleware: flush this environment's spans (bounded) and metrics to every enabled sink after every
 * invocation, success or failure; `push: 'background'` leaves the Pushgateway push unawaited (see MetricSinks.flush).
 */
export function flushMetricsAfter(
  source: DepsSource,
  opts: { push: 'await' | 'background' } = { push: 'await' },
): middy.MiddlewareObj<unknown, unknown, Error, Context> {
  const flush = async (request: middy.Request<unknown, unknown, Error, Context>) => {
    // A failed cold start has no sinks; its error is the invocation's, not this middleware's.
    const deps = await Promise.resolve()
      .then(source)
      .catch(() => undefined)
    if (!deps) return
    const log = forInvocation(deps, request.context).log
    // Spans first, bounded by TRACES_FLUSH_TIMEOUT_MS: spans a collector lost are counted in this flush's push.
    await deps.tracing.flush(log, spans => deps.metrics.traceSpansDropped.inc(spans))
    // The sinks log and swallow their own failures; none may fail the invocation.
    await deps.sinks.flush(log, opts)
  }
  // The flush first: it uses this invocation's deps, which a renewal would drop.
  const flushThenRenew = async (request: middy.Request<unknown, unknown, Error, Context>) => {
    await flush(request)
    for (const failure of failuresOf(request)) if (renewSecretsAfter(failure)) break
  }
  return { after: flushThenRenew, onError: flushThenRenew }
}

/** What failed in an invocation: its error, or the rejected records of a partial batch (dispatch's settled results). */
function failuresOf(request: middy.Request<unknown, unknown, Error, Context>): unknown[] {
  if (request.error) return [request.error]
  const response: unknown = request.response
  if (!Array.isArray(response)) return []
  return response.flatMap((r: unknown) =>
    typeof r === 'object' && r !== null && 'status' in r && r.status === 'rejected' && 'reason' in r ? [r.reason] : [],
  )
}

/**
 * Closes the pool's idle connections (the sweeper's, at the end of a pass): Lambda gives no hook before
 * it freezes an environment, and a frozen environment would hold them open on the server for the minute
 * until the next pass. pg's pool has no "close idle" call; checking an idle client out and releasing it
 * destroyed is the public way. A client in use is never touched, and none is opened.
 */
export async function closeIdleConnections(pool: Pick<pg.Pool, 'idleCount' | 'connect'>): Promise<void> {
  for (let left = pool.idleCount; left > 0 && pool.idleCount > 0; left--) {
    const client = await pool.connect()
    client.release(true)
  }
}
