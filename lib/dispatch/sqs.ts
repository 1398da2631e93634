import type { Deps } from '../deps.js'
import { drainProject, type DrainOptions } from './drain.js'

/**
 * Drains each distinct project once, a few at a time, each for at most DISPATCH_PROJECT_SLICE_MS of
 * claiming: a project with more work yields its place with a continuation signal, so every project
 * named in the batch starts within seconds, however deep another's backlog. Returns the error of every project whose drain
 * threw (logged and counted as a crash here); the caller has its signals redelivered.
 */
export async function drainProjects(deps: Deps, projects: readonly string[], opts: DrainOptions): Promise<Map<string, unknown>> {
  // Each drain holds up to three connections at once (claim, record, release); more drains than the
  // pool can serve would wait on it and time out, so they run a few at a time.
  const parallel = Math.max(1, Math.floor(deps.config.DB_POOL_MAX / 3))
  const outcomes = await mapLimited([...new Set(projects)], parallel, async project => {
    try {
      const result = await drainProject(deps, project, { ...opts, sliceMs: deps.config.DISPATCH_PROJECT_SLICE_MS })
      deps.log.debug('Drain finished', { project, ...result })
      return undefined
    } catch (error) {
      deps.metrics.forProject(project).crashed()
      deps.log.error('Dispatch of a project crashed; its signal will be redelivered', { project, error })
      return [project, error] as const
    }
  })
  return new Map(outcomes.filter(o => o !== undefined))
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
