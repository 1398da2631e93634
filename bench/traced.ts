import type { SQSClient } from '@aws-sdk/client-sqs'
import { project, setupActions, type ActionsBench } from './actions.js'
import type { CollectorProcess } from './collector.js'
import type { RunResult, TimedContext } from './timed.js'

/** The traced row's settings: every trace sampled (ratio 1), exported over OTLP/HTTP to the collector process. */
export const TRACED_SAMPLER = 'always_on'

/** `actions-b1-traced`: `actions-b1` on an ActionsBench of its own database with tracing on. */
export type TracedBench = {
  actions: ActionsBench
  /** Delivers `n` events enqueued through the traced enqueue; `spans` is what the collector took from the delivery. */
  deliver(n: number): Promise<RunResult>
  close(): Promise<void>
}

/**
 * Sets up the traced row over `url` (a database of its own, so its meter counts its own backends).
 * The engine registers no context manager (spans get their parents passed), so nothing of the traced
 * row stays on for the untraced rows interleaved with it.
 */
export async function setupTraced(
  url: string,
  receiverUrl: string,
  sqs: SQSClient,
  signalQueueUrl: string,
  ctx: TimedContext,
  collector: CollectorProcess,
): Promise<TracedBench> {
  const actions = await setupActions(url, receiverUrl, sqs, signalQueueUrl, ctx, {
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
    OTEL_TRACES_SAMPLER: TRACED_SAMPLER,
    OTEL_TRACES_SAMPLER_ARG: '1',
  })
  const { deps } = actions
  if (!deps.tracing.enabled) throw new Error('tracing did not turn on for the traced row')
  const flush = () => deps.tracing.flush(deps.log, () => {})
  return {
    actions,
    deliver: async n => {
      const result = await actions.deliver(1, n, 'entity', async () => {
        // The enqueue spans go out before the clock, and every stored event must carry its context.
        await flush()
        const { rows } = await deps.db.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM actions_event WHERE project = $1 AND traceparent IS NOT NULL',
          [project(1)],
        )
        if (rows[0]?.n !== n) throw new Error(`${rows[0]?.n ?? 0} of ${n} events carry a traceparent`)
        await collector.reset()
      })
      // Up to one export batch (512 spans) is still queued when the clock stops; it is counted, not timed.
      await flush()
      return { ...result, spans: (await collector.counts()).spans }
    },
    close: () => actions.close(),
  }
}
