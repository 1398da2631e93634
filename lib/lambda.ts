import { CloudWatchClient } from '@aws-sdk/client-cloudwatch'
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm'
import type middy from '@middy/core'
import { loadConfig, resolveSecrets } from './config.js'
import { createDeps, type Deps } from './deps.js'
import { createCloudWatchSink, type CloudWatchSink } from './metrics-cloudwatch.js'
import { createCounterPusher, type CounterPusher } from './metrics-push.js'

/** Dependencies plus the per-environment metric sinks, as each handler sees them. */
export type Runtime = { deps: Deps; pusher: CounterPusher; cloudwatch?: CloudWatchSink }

/** Wraps dependencies with their metric sinks: the Pushgateway pusher, and CloudWatch when enabled. */
export function createRuntime(deps: Deps, cloudwatchClient?: CloudWatchClient): Runtime {
  const { config, metrics, log } = deps
  const pusher = createCounterPusher(config, metrics, log)
  if (!config.CLOUDWATCH_METRICS) return { deps, pusher }
  const client = cloudwatchClient ?? new CloudWatchClient({ region: config.AWS_REGION })
  return { deps, pusher, cloudwatch: createCloudWatchSink({ namespace: config.CLOUDWATCH_NAMESPACE, client, log, timeoutMs: config.PUSHGATEWAY_TIMEOUT_MS }) }
}

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
    return createRuntime(createDeps(loadConfig(env)))
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
    if (!rt) return
    // Both sinks log and swallow their own failures; neither may fail the invocation.
    await Promise.all([rt.pusher.push(), rt.cloudwatch?.flushCounters(rt.deps.metrics.registry)])
  }
  return { after: push, onError: push }
}
