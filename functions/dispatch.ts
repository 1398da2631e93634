import middy from '@middy/core'
import sqsPartialBatchFailure from '@middy/sqs-partial-batch-failure'
import type { Context, SQSEvent, SQSRecord } from 'aws-lambda'
import type { DrainOptions } from '../lib/dispatch/drain.js'
import { drainProjects, parseSignal } from '../lib/dispatch/projects.js'
import type { Logger } from '../lib/log.js'
import { coldStartDeps, flushMetricsAfter, forInvocation, type DepsSource } from './runtime.js'

/** Builds the dispatch handler over its dependencies; the deployed one uses the cold-start ones. */
export const createHandler = (source: DepsSource, hooks: Pick<DrainOptions, 'onBatch'> = {}) =>
  middy(async (event: SQSEvent, context: Context) => {
    const deps = forInvocation(await source(), context)
    const projects = projectsOf(event.Records, deps.log)
    const crashed = await drainProjects(
      deps,
      projects.filter(p => p !== undefined),
      { ...hooks, remainingMs: () => context.getRemainingTimeInMillis() },
    )
    return settled(projects, crashed)
  })
    // Our own log line names the project; the middleware's console dump of the error would not be JSON.
    .use(sqsPartialBatchFailure({ logger: () => {} }))
    .use(flushMetricsAfter(source))

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
