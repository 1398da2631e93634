// The deps an after-invocation middleware works with, if the cold start built any.
import type { Deps } from '../../lib/deps.js'
import type { DepsSource } from './cold-start.js'

/** The invocation's deps, or undefined when the cold start failed: that error is the invocation's, not a middleware's. */
export async function invocationDeps(source: DepsSource): Promise<Deps | undefined> {
  return Promise.resolve()
    .then(source)
    .catch(() => undefined)
}
