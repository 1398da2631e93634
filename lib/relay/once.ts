import type pg from 'pg'
import { createPool } from '../db/pool.js'
import { describeError } from '../errors.js'
import { followSchema } from './follow.js'
import { moveBatch } from './move.js'
import { outboxColumnProblems } from './outbox.js'
import { MAX_SKIPPED_REFUSED, RelayStartError, type RelayDeps, type RelayOptions, type RelaySource } from './relay.js'
import { refusedIds } from '../db/relay.js'
import { parseRelaySources } from './sources.js'

/** What one pass over a project did. */
export type PassResult = { project: string; moved: number; refused: number; error?: string }

/**
 * One bounded pass over every source, for a scheduled run without a long-running process (the
 * `relay` Lambda): per project, check the outbox, follow the schema, then move batches until the
 * outbox has no more takeable rows or `remainingMs()` falls under `marginMs`. One project failing does
 * not stop the others; its error is in its result and in the log.
 */
export async function relayOnce(
  deps: RelayDeps,
  sources: RelaySource[],
  options: Pick<RelayOptions, 'batchSize' | 'pool'>,
  remainingMs: () => number,
  marginMs: number,
): Promise<PassResult[]> {
  const results: PassResult[] = []
  for (const source of sources) {
    const pool = createPool(source.url, 1, options.pool)
    try {
      results.push(await passOver(deps, source, pool, options.batchSize, () => remainingMs() > marginMs))
    } catch (e) {
      deps.metrics.forProject(source.project).failedPass()
      deps.log.error('Relay pass failed', { project: source.project, error: e })
      results.push({ project: source.project, moved: 0, refused: 0, error: describeError(e).message })
    } finally {
      await pool.end().catch(() => {})
    }
  }
  return results
}

async function passOver(
  deps: RelayDeps,
  source: RelaySource,
  pool: pg.Pool,
  batchSize: number,
  timeLeft: () => boolean,
): Promise<PassResult> {
  const { project } = source
  const problems = await outboxColumnProblems(pool)
  if (problems.length) throw new RelayStartError(`The outbox is not the one @contember/engine-server 2.0.8 writes: ${problems.join('; ')}`)
  const followed = await followSchema(pool, deps.actions, project)
  if (followed.storedVersion !== undefined)
    deps.log.info("Stored the engine's deployed actions schema as a new Actions schema version", {
      project,
      version: followed.storedVersion,
    })
  let skip = await refusedIds(deps.actions, project, MAX_SKIPPED_REFUSED)
  let moved = 0
  while (timeLeft()) {
    const result = await moveBatch({ source: pool, actions: deps.actions }, project, skip, batchSize)
    moved += result.moved.length
    deps.metrics.forProject(project).moved(result.written)
    for (const r of result.refused)
      deps.log.warn("Relay left a row in the engine's outbox", {
        project,
        eventId: r.eventId,
        target: r.target,
        trigger: r.trigger,
        reason: r.reason,
      })
    skip = [...new Set([...skip, ...result.refused.map(r => r.eventId)])].slice(0, MAX_SKIPPED_REFUSED)
    if (result.moved.length > 0)
      await deps.signals
        ?.send(project)
        .catch(error => deps.log.error('Could not signal the dispatch queue; the sweeper will pick the events up', { project, error }))
    if (result.taken < batchSize || result.moved.length + result.refused.length === 0) break
  }
  deps.metrics.forProject(project).refused(skip.length)
  return { project, moved, refused: skip.length }
}

/** Time kept back at the end of a scheduled pass: one more batch (two transactions) fits well inside it. */
export const RELAY_PASS_MARGIN_MS = 10_000

/** What a scheduled pass needs of the functions' dependencies. */
export type ScheduledRelayDeps = RelayDeps & {
  config: {
    RELAY_SOURCES?: string | undefined
    RELAY_BATCH_SIZE: number
    DB_STATEMENT_TIMEOUT_MS: number
    DB_PREPARED_STATEMENTS: boolean
    DATABASE_CA?: string | undefined
  }
}

/** One scheduled pass over the sources of RELAY_SOURCES (none: nothing to do), bounded by `remainingMs`. */
export async function scheduledRelayPass(deps: ScheduledRelayDeps, remainingMs: () => number): Promise<PassResult[]> {
  const { config } = deps
  if (!config.RELAY_SOURCES) return []
  const sources = parseRelaySources(
    config.RELAY_SOURCES.split(',')
      .map(s => s.trim())
      .filter(Boolean),
  )
  const pool = {
    statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
    preparedStatements: config.DB_PREPARED_STATEMENTS,
    ...(config.DATABASE_CA ? { ca: config.DATABASE_CA } : {}),
  }
  return relayOnce(deps, sources, { batchSize: config.RELAY_BATCH_SIZE, pool }, remainingMs, RELAY_PASS_MARGIN_MS)
}
