// middy middleware, one job: after an invocation the database refused to log in to, read the secret again.
import type middy from '@middy/core'
import type { Context } from 'aws-lambda'
import { renewSecretsAfter } from './cold-start.js'

/**
 * Renews the cold start's DATABASE_URL when the invocation (or one record of a partial batch) failed
 * because Postgres refused the login: the next invocation reads the secret past the cache and builds
 * new deps. Register it before the flushes: middy runs `after` hooks last-registered first, and the
 * flushes still use this invocation's deps, which a renewal drops.
 */
export function renewSecretAfterRefusal(): middy.MiddlewareObj<unknown, unknown, Error, Context> {
  const renew = async (request: middy.Request<unknown, unknown, Error, Context>) => {
    for (const failure of failuresOf(request)) if (renewSecretsAfter(failure)) break
  }
  return { after: renew, onError: renew }
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
