// Dispatch as the SQS event source drives it: a poller invoking the handler with real batches, and
// at shutdown the drains under way stop claiming, release what they had not started and record the rest.
import type { SQSClient } from '@aws-sdk/client-sqs'
import type { Context, SQSEvent } from 'aws-lambda'
import type { Deps } from '../../lib/deps.js'
import { lambdaContext } from '../lambda.js'
import { startPoller } from '../poller.js'
import { cutShortWhen, within, type Cleanups } from './shutdown.js'

/** Slack beyond the longest target timeout for in-flight drains to record and release before we stop waiting. */
const SHUTDOWN_SLACK_MS = 15_000
/** Signals received per invocation: the event source's batch size. */
const BATCH_SIZE = 10

export type DispatchPoller = {
  sqs: SQSClient
  queueArn: string
  invoke: (event: SQSEvent, context: Context) => Promise<unknown>
  timeoutMs: number
  /** True once the stack is stopping: invocations under way then see no time left. */
  stopping: () => boolean
}

/** Starts polling the signal queue; stopping waits for the drains, at most the longest target timeout plus slack. */
export function startDispatchPoller(deps: Deps, p: DispatchPoller, cleanups: Cleanups): void {
  const { config } = deps
  const poller = startPoller({
    sqs: p.sqs,
    queueUrl: config.SIGNAL_QUEUE_URL,
    queueArn: p.queueArn,
    batchSize: BATCH_SIZE,
    concurrency: config.DISPATCH_MAX_CONCURRENCY,
    timeoutMs: p.timeoutMs,
    invoke: p.invoke,
    context: () => cutShortWhen(p.stopping, lambdaContext('dispatch', p.timeoutMs)),
    log: deps.log,
  })
  cleanups.push(async () => {
    // The slowest in-flight delivery ends by its target's timeout.
    if (!(await within(config.MAX_TARGET_TIMEOUT_MS + SHUTDOWN_SLACK_MS, poller.stop()))) {
      deps.log.error('Dispatch did not finish in time at shutdown; its claims return when their leases end')
    }
  })
}
