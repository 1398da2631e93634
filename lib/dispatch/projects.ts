import type { Deps } from '../deps.js'
import { SpanKind } from '@opentelemetry/api'
import { spanIds } from '../tracing/tracing.js'
import { drainProject, type DrainOptions, type DrainResult } from './drain.js'

/**
 * How soon every project of an invocation should have started delivering, whatever the pool allows
 * in parallel: while projects wait for a place, the drains running shorten their slices to share
 * this between them (a pool of 3 runs one drain at a time, and three small projects behind a deep
 * one waited a whole 5 s slice).
 */
export const FAIR_START_MS = 1_000
/** The shortest slice a drain gets while others wait: it still delivers something before it yields. */
export const MIN_SLICE_MS = 100

/**
 * Drains each distinct project once, a few at a time, each for at most DISPATCH_PROJECT_SLICE_MS of
 * claiming, less while other projects wait for a place (FAIR_START_MS): a project with more work
 * yields its place with a continuation signal, so every project named in the batch starts within a
 * second or two, however deep another's backlog. Returns the error of every project whose drain
 * threw (logged and counted as a crash here); the caller has its signals redelivered.
 */
export async function drainProjects(deps: Deps, projects: readonly string[], opts: DrainOptions): Promise<Map<string, unknown>> {
  // Each drain holds up to three connections at once (claim, record, release); more drains than the
  // pool can serve would wait on it and time out, so they run a few at a time.
  const parallel = Math.max(1, Math.floor(deps.config.DB_POOL_MAX / 3))
  const configured = deps.config.DISPATCH_PROJECT_SLICE_MS
  const queue = limiter([...new Set(projects)], parallel)
  const sliceMs = () => {
    const waiting = queue.waiting()
    return waiting === 0 ? configured : Math.min(configured, Math.max(MIN_SLICE_MS, (FAIR_START_MS * parallel) / waiting))
  }
  const outcomes = await queue.map(async project => {
    try {
      const result = await tracedDrain(deps, project, { ...opts, sliceMs })
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

/** One drain, in an `actions.dispatch` consumer span when tracing is on: the project and what the drain came to. */
function tracedDrain(deps: Deps, project: string, opts: DrainOptions): Promise<DrainResult> {
  if (!deps.tracing.enabled) return drainProject(deps, project, opts)
  const attributes = { 'contember.actions.project': project }
  return deps.tracing.span('actions.dispatch', { kind: SpanKind.CONSUMER, attributes }, async (span, trace) => {
    // The drain's lines carry the span's ids; its webhook and statement spans are children of `trace`.
    const result = await drainProject({ ...deps, log: deps.log.child(spanIds(span)) }, project, { ...opts, trace })
    span.setAttributes({
      'contember.actions.succeeded': result.succeeded,
      'contember.actions.retried': result.retried,
      'contember.actions.failed': result.failedAfterAttempt + result.failedUnknownTarget,
      'contember.actions.batches': result.batches,
      'contember.actions.stop': result.stop,
    })
    return result
  })
}

/** The project named by a signal body `{"project":"…"}`, or undefined when the body is not one. */
export function parseSignal(body: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body)
    if (
      typeof parsed === 'object' &&
      parsed !== null &&
      'project' in parsed &&
      typeof parsed.project === 'string' &&
      parsed.project.length > 0
    ) {
      return parsed.project
    }
  } catch {
    // falls through: not JSON
  }
  return undefined
}

/** Maps with at most `limit` calls in flight, keeping the input order; `waiting` counts the items not started yet. */
function limiter<T>(items: readonly T[], limit: number) {
  const todo = items.map((item, i) => ({ item, i }))
  return {
    waiting: () => todo.length,
    async map<R>(fn: (item: T) => Promise<R>): Promise<R[]> {
      const out: R[] = new Array(items.length)
      await Promise.all(
        Array.from({ length: Math.min(limit, items.length) }, async () => {
          for (let job = todo.shift(); job; job = todo.shift()) out[job.i] = await fn(job.item)
        }),
      )
      return out
    },
  }
}
