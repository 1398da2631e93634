import type { SQSRecord } from 'aws-lambda'
import type { Deps } from '../deps.js'
import { drainProject, type DrainOptions } from './drain.js'

/**
 * Handles one SQS batch of signals: drains each distinct project once, all projects at the same time.
 * Returns one settled result per record, in record order, as @middy/sqs-partial-batch-failure expects:
 * records of a project whose drain threw are rejected (redelivered by SQS); malformed ones are
 * reported and fulfilled, so they are dropped rather than retried forever.
 */
export async function handleSignals(deps: Deps, records: readonly SQSRecord[], opts: DrainOptions): Promise<PromiseSettledResult<unknown>[]> {
  const projectOf = records.map(r => parseSignal(r.body))
  const projects = [...new Set(projectOf.filter((p): p is string => p !== undefined))]
  records.forEach((r, i) => {
    if (projectOf[i] === undefined) deps.log.error('Dropped a malformed dispatch signal', { messageId: r.messageId })
  })
  // Each drain holds up to three connections at once (claim, record, release); more drains than the
  // pool can serve would wait on it and time out, so they run a few at a time.
  const parallel = Math.max(1, Math.floor(deps.config.DB_POOL_MAX / 3))
  const outcomes = new Map(await mapLimited(projects, parallel, async project => {
    try {
      const result = await drainProject(deps, project, opts)
      deps.log.debug('Drain finished', { project, ...result })
      return [project, undefined] as const
    } catch (error) {
      deps.metrics.forProject(project).crashed()
      deps.log.error('Dispatch of a project crashed; its signal will be redelivered', { project, error })
      return [project, error] as const
    }
  }))
  return projectOf.map((project): PromiseSettledResult<unknown> => {
    const error = project === undefined ? undefined : outcomes.get(project)
    return error === undefined ? { status: 'fulfilled', value: project } : { status: 'rejected', reason: error }
  })
}

/** The project named by a signal body `{"project":"…"}`, or undefined when the body is not one. */
export function parseSignal(body: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body)
    if (typeof parsed === 'object' && parsed !== null && 'project' in parsed && typeof parsed.project === 'string' && parsed.project.length > 0) {
      return parsed.project
    }
  } catch {
    // falls through: not JSON
  }
  return undefined
}

/** Maps with at most `limit` calls in flight, keeping the input order. */
async function mapLimited<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length)
  const todo = items.map((item, i) => ({ item, i }))
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, async () => {
    for (let job = todo.shift(); job; job = todo.shift()) out[job.i] = await fn(job.item)
  }))
  return out
}
