import type middy from '@middy/core'
import { loadConfig } from './config.js'
import { createDeps, type Deps } from './deps.js'
import { createCounterPusher, type CounterPusher } from './metrics-push.js'

/** Dependencies plus the per-environment metrics pusher, as each handler sees them. */
export type Runtime = { deps: Deps; pusher: CounterPusher }

let cached: Runtime | undefined

/** Builds the runtime once per cold start from the validated environment; a bad environment fails the cold start. */
export function lambdaRuntime(): Runtime {
  if (!cached) {
    const deps = createDeps(loadConfig(process.env))
    cached = { deps, pusher: createCounterPusher(deps.config, deps.metrics, deps.log) }
  }
  return cached
}

/** middy middleware: push this environment's counters after every invocation, success or failure. */
export function pushMetricsAfter(runtime: () => Runtime): middy.MiddlewareObj {
  const push = async () => { await runtime().pusher.push() }
  return { after: push, onError: push }
}
