import { closeSync, openSync, writeSync } from 'node:fs'
import type { SQSClient } from '@aws-sdk/client-sqs'
import type { SQSEvent } from 'aws-lambda'
import { createHandler } from '../functions/dispatch.js'
import { createDeps } from '../lib/deps.js'
import { createLogger } from '../lib/log.js'
import { lambdaContext } from '../local/lambda.js'
import { project, type ActionsBench } from './actions.js'
import type { EventSource } from './deployment.js'
import { timedDelivery, type RunResult, type TimedContext } from './timed.js'

/** Bounds one run's invocations: each drains one slice (DISPATCH_PROJECT_SLICE_MS), so 1,000 is far past any N here. */
const MAX_INVOCATIONS = 1_000

export type HandlerBench = {
  /** Delivers `n` pre-enqueued events of the batchSize 1 project through the dispatch handler, one invocation after another. */
  deliver(n: number): Promise<RunResult>
  /**
   * The edge's fixed cost: `k` invocations, one after another, for a project with nothing due (its
   * claim finds nothing), CPU and statements per invocation. A backlog pays it once per slice.
   */
  idleInvocations(k: number): Promise<{ ownUs: number; pgUs: number; statements: number }>
  close(): Promise<void>
}

/**
 * The dispatch Lambda's edge around drainProject, as deployed: the middy stack (partial batch
 * failures, the metrics flush after every invocation), the invocation's child logger, drainProjects'
 * slices, and a Lambda context counting down from the deployed timeout. Its deps share the drain rows'
 * pool (so statements and updates are counted alike) and keep-alive agent, with the deployment's
 * metrics and log settings: EMF lines on (serverless.yml's cloudwatchMetrics), LOG_LEVEL info, every
 * line written, as Lambda's stdout would take it, to /dev/null rather than the report's stdout.
 * A slice that ends with work left sends a continuation signal (to the bench's queue, unread) and
 * the next invocation follows at once, as the event source would start it.
 */
export function setupHandler(actions: ActionsBench, sqs: SQSClient, source: EventSource, ctx: TimedContext): HandlerBench {
  const devNull = openSync('/dev/null', 'w')
  const deps = createDeps(
    { ...actions.config, CLOUDWATCH_METRICS: true, LOG_LEVEL: 'info' },
    {
      sqs,
      db: actions.deps.db,
      http: actions.deps.http,
      signals: actions.deps.signals,
      log: createLogger('info', line => {
        writeSync(devNull, line + '\n')
      }),
    },
  )
  const handler = createHandler(() => deps)
  const name = project(1)
  return {
    deliver: async n => {
      await actions.truncate()
      await actions.prepare(name, n)
      return actions.withUpdates(() =>
        timedDelivery(
          ctx,
          n,
          async () => {
            const invokeAll = async () => {
              for (let i = 0; i < MAX_INVOCATIONS; i++) {
                const result: unknown = await handler(signalEvent(name, i), lambdaContext('bench-dispatch', source.timeoutMs))
                if (!isEmptyFailureList(result)) throw new Error(`the handler rejected its signal: ${JSON.stringify(result)}`)
                if ((await actions.countByState(name, 'succeed')) === n) return
              }
            }
            const invoked = invokeAll()
            return {
              finished: invoked,
              stop: async () => {
                await invoked
                return (await actions.countByState(name, 'succeed')) === n
              },
            }
          },
          actions.statements,
        ),
      )
    },
    idleInvocations: async k => {
      await actions.truncate()
      actions.statements.reset()
      const start = await ctx.cpu.start()
      for (let i = 0; i < k; i++) await handler(signalEvent(name, i), lambdaContext('bench-dispatch', source.timeoutMs))
      const cpu = await ctx.cpu.stop(start)
      return { ownUs: (cpu.benchMs / k) * 1000, pgUs: (cpu.postgresMs / k) * 1000, statements: actions.statements.count() / k }
    },
    close: async () => {
      closeSync(devNull)
    },
  }
}

/** One SQS record with the signal body `{"project":…}`, as the event source hands the handler a batch. */
function signalEvent(projectName: string, i: number): SQSEvent {
  return {
    Records: [
      {
        messageId: `bench-${i}`,
        receiptHandle: `bench-${i}`,
        body: JSON.stringify({ project: projectName }),
        attributes: {
          ApproximateReceiveCount: '1',
          SentTimestamp: String(Date.now()),
          SenderId: 'bench',
          ApproximateFirstReceiveTimestamp: String(Date.now()),
        },
        messageAttributes: {},
        md5OfBody: '',
        eventSource: 'aws:sqs',
        eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:bench-signals',
        awsRegion: 'us-east-1',
      },
    ],
  }
}

const isEmptyFailureList = (r: unknown): boolean =>
  typeof r === 'object' && r !== null && 'batchItemFailures' in r && Array.isArray(r.batchItemFailures) && r.batchItemFailures.length === 0
