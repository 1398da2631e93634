import middy from '@middy/core'
import sqsPartialBatchFailure from '@middy/sqs-partial-batch-failure'
import type { Context, SQSEvent, SQSRecord } from 'aws-lambda'
import type { DrainOptions } from '../lib/dispatch/drain.js'
import { drainProjects, parseSignal } from '../lib/dispatch/projects.js'
import { createLogger, type Logger } from '../lib/log.js'
import { coldStartDeps, flushMetricsAfter, flushSpansAfter, forInvocation, renewSecretAfterRefusal, type DepsSource } from './runtime.js'

/**
 * The logger of each record's invocation, for the partial-batch middleware, which is given the record
 * only. Before the deps exist (a failed cold start) a plain JSON logger writes the line.
 */
const recordLogs = new WeakMap<SQSRecord, Logger>()
const beforeDeps = createLogger()

/** One line per record handed back to SQS for redelivery: the message id and the error's safe description. */
function logRedelivery(reason: unknown, record: SQSRecord): void {
  ;(recordLogs.get(record) ?? beforeDeps).warn('Dispatch signal returned to the queue for redelivery', {
    messageId: record.messageId,
    error: reason,
  })
}

/** Builds the dispatch handler over its dependencies; the deployed one uses the cold-start ones. */
export const createHandler = (source: DepsSource, hooks: Pick<DrainOptions, 'onBatch'> = {}) =>
  middy(async (event: SQSEvent, context: Context) => {
    const deps = forInvocation(await source(), context)
    for (const r of event.Records) recordLogs.set(r, deps.log)
    const projects = projectsOf(event.Records, deps.log)
    const crashed = await drainProjects(
      deps,
      projects.filter(p => p !== undefined),
      { ...hooks, remainingMs: () => context.getRemainingTimeInMillis() },
    )
    return settled(projects, crashed)
  })
    // Its logger writes our JSON lines; the middleware's default, console.error, would not be JSON.
    .use(sqsPartialBatchFailure({ logger: logRedelivery }))
    // After the partial-batch middleware: the renewal reads each record's settled result before it is mapped.
    .use(renewSecretAfterRefusal())
    .use(flushMetricsAfter(source))
    .use(flushSpansAfter(source))

/** Triggered by the signal queue with ReportBatchItemFailures. */
export const handler = createHandler(coldStartDeps)

/** The project each record's signal names, in record order; a malformed one is reported and left undefined. */
function projectsOf(records: readonly SQSRecord[], log: Logger): Array<string | undefined> {
  return records.map(r => {
    const project = parseSignal(r.body)
    if (project === undefined) log.error('Dropped a malformed dispatch signal', { messageId: r.messageId })
    return project
  })
}

/**
 * One settled result per record, in record order, as @middy/sqs-partial-batch-failure expects:
 * records of a project whose drain threw are rejected (redelivered by SQS); malformed ones are
 * fulfilled, so they are dropped rather than retried forever.
 */
function settled(projects: ReadonlyArray<string | undefined>, crashed: ReadonlyMap<string, unknown>): PromiseSettledResult<unknown>[] {
  return projects.map(project =>
    project !== undefined && crashed.has(project)
      ? { status: 'rejected', reason: crashed.get(project) }
      : { status: 'fulfilled', value: project },
  )
}
