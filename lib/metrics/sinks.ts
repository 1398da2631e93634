import type { Logger } from '../log.js'
import type { Metrics, SweeperGauges } from './registry.js'
import { createEmfSink, EMF_SERVICE } from './emf.js'
import { createCounterPusher, pushSweeperGauges, type PushSettings } from './push.js'

/** Every enabled metric sink of this environment behind one entry point: the Pushgateway and EMF lines. */
export type MetricSinks = {
  /** This environment's grouping-key instance (the sweeper never deletes its own group as stale). */
  instance: string
  /**
   * End of an invocation: counters (and EMF durations) to every enabled sink. Never throws. With
   * `push: 'background'` (enqueue, on a caller's request path) the Pushgateway push is started and
   * not awaited: the EMF lines are written at once, the push finishes in the background (or when a
   * frozen environment thaws); counters are cumulative, so a push that never lands is made up by the next.
   */
  flush(log: Logger, opts?: { push: 'await' | 'background' }): Promise<void>
  /** The sweeper's gauges to every enabled sink, once per pass. Never throws. */
  gauges(gauges: SweeperGauges, log: Logger): Promise<void>
}

/** The settings the sinks read (lib/config.ts's names): the push's, and CloudWatch EMF's. */
export type SinkSettings = PushSettings & { CLOUDWATCH_METRICS: boolean; CLOUDWATCH_NAMESPACE: string; METRICS_STAGE?: string | undefined }

/**
 * Builds the sinks the config enables: the Pushgateway when PUSHGATEWAY_URL is set, EMF lines when
 * CLOUDWATCH_METRICS is on. Returns the metrics to record into (EMF keeps raw durations beside them).
 */
export function createMetricSinks(config: SinkSettings, base: Metrics): { metrics: Metrics; sinks: MetricSinks } {
  const emf = config.CLOUDWATCH_METRICS ? createEmfSink(config.CLOUDWATCH_NAMESPACE, EMF_SERVICE, config.METRICS_STAGE) : undefined
  const metrics = emf ? emf.tap(base) : base
  const pusher = createCounterPusher(config, metrics)
  // At most one background push in flight: against a Pushgateway that hangs, pushes must not pile up.
  let background: Promise<void> | undefined
  return {
    metrics,
    sinks: {
      instance: pusher.instance,
      flush: async (log, opts = { push: 'await' }) => {
        if (opts.push === 'background') {
          background ??= pusher.push(log).finally(() => {
            background = undefined
          })
          return emf?.flush(metrics.registry, log)
        }
        // The push first: a failed push is counted, and that count goes out in this invocation's EMF line.
        await pusher.push(log)
        await emf?.flush(metrics.registry, log)
      },
      gauges: async (gauges, log) => {
        await Promise.all([pushSweeperGauges(config, metrics, gauges, log), emf?.gauges(gauges, log)])
      },
    },
  }
}
