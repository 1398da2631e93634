import { GetParameterError } from '@aws-lambda-powertools/parameters/errors'
import { SSMProvider } from '@aws-lambda-powertools/parameters/ssm'
import { SSMClient } from '@aws-sdk/client-ssm'
import type middy from '@middy/core'
import type { Context } from 'aws-lambda'
import type pg from 'pg'
import { loadConfig, resolveSecrets } from '../lib/config.js'
import { createDeps, type Deps } from '../lib/deps.js'

/** Where a handler gets its dependencies: the cold-start ones in Lambda, a test's or the local stack's elsewhere. */
export type DepsSource = () => Deps | Promise<Deps>

let cached: Promise<Deps> | undefined

/**
 * Builds the dependencies once per cold start from the validated environment (reading DATABASE_URL
 * from SSM when the template names a parameter); a bad environment fails the cold start with every problem.
 */
export function coldStartDeps(): Promise<Deps> {
  cached ??= (async () => {
    const env = await resolveSecrets(process.env, ssmParameterReader(() => new SSMClient({})))
    return createDeps(loadConfig(env))
  })()
  // A failed cold start must not be cached: the next invocation tries again.
  cached.catch(() => { cached = undefined })
  return cached
}

/** How long a SecureString read through Powertools stays cached in this environment (a re-read within it asks SSM nothing). */
export const SSM_CACHE_SECONDS = 300

/**
 * Reads a SecureString, decrypted, through Powertools' SSM provider, cached for SSM_CACHE_SECONDS (the
 * client is built on first use). A failed read rethrows the SDK's own error (ParameterNotFound,
 * AccessDeniedException, …), so the cold-start error names what SSM said, not Powertools' wrapper.
 */
export function ssmParameterReader(client: () => SSMClient, maxAgeSeconds = SSM_CACHE_SECONDS) {
  let provider: SSMProvider | undefined
  return async (name: string): Promise<string | undefined> => {
    provider ??= new SSMProvider({ awsSdkV3Client: client() })
    try {
      return await provider.get(name, { decrypt: true, maxAge: maxAgeSeconds })
    } catch (error) {
      throw error instanceof GetParameterError && error.cause !== undefined ? error.cause : error
    }
  }
}

/**
 * This invocation's view of the cold-start dependencies: every line its logger writes (EMF lines
 * included) carries the Lambda request id, so an on-call can group one invocation's lines.
 */
export function forInvocation(deps: Deps, context: Pick<Context, 'awsRequestId'>): Deps {
  return { ...deps, log: deps.log.child({ awsRequestId: context.awsRequestId }) }
}

/**
 * middy middleware: flush this environment's metrics to every enabled sink after every invocation, success or
 * failure; `push: 'background'` leaves the Pushgateway push unawaited (see MetricSinks.flush).
 */
export function flushMetricsAfter(source: DepsSource, opts: { push: 'await' | 'background' } = { push: 'await' }): middy.MiddlewareObj<unknown, unknown, Error, Context> {
  const flush = async (request: middy.Request<unknown, unknown, Error, Context>) => {
    // A failed cold start has no sinks; its error is the invocation's, not this middleware's.
    const deps = await Promise.resolve().then(source).catch(() => undefined)
    if (!deps) return
    // The sinks log and swallow their own failures; none may fail the invocation.
    await deps.sinks.flush(forInvocation(deps, request.context).log, opts)
  }
  return { after: flush, onError: flush }
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
