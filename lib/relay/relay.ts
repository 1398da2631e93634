import pg from 'pg'
import { createPool, type PoolSettings } from '../db/pool.js'
import { refusedIds } from '../db/relay.js'
import { describeError } from '../errors.js'
import type { Logger } from '../log.js'
import type { RelayMetrics } from '../metrics/relay.js'
import type { Signals } from '../signals.js'
import { followSchema } from './follow.js'
import { moveBatch, type MoveResult } from './move.js'
import { OUTBOX_CHANNEL, outboxColumnProblems, outboxStates } from './outbox.js'

/**
 * Refused rows a relay skips per project at most when it reads the outbox: their ids go with every
 * read (36 bytes each), so this bounds that statement. Past it, the further refused rows are read and
 * refused again on every pass; they take room in a batch, and the relay says so in an error line.
 */
export const MAX_SKIPPED_REFUSED = 1_000

/** One Contember project database the relay moves from, and the Actions project its events go to. */
export type RelaySource = { project: string; url: string }

/** How the relay runs; the defaults are in {@link DEFAULT_RELAY_OPTIONS}. */
export type RelayOptions = {
  /** Rows moved per batch. */
  batchSize: number
  /** Longest time between two looks at an idle outbox: a lost notification costs at most this. */
  pollIntervalMs: number
  /** LISTEN for the engine's notifications (off behind a transaction pooler, where LISTEN does not work). */
  listen: boolean
  /** Connections per Contember database (the LISTEN connection is one more). */
  poolMax: number
  /** The pool settings of docs/database.md (statement timeout, pooler mode, TLS) for the Contember databases. */
  pool: PoolSettings
}

export const DEFAULT_RELAY_OPTIONS: RelayOptions = { batchSize: 100, pollIntervalMs: 5_000, listen: true, poolMax: 2, pool: {} }

/** Longest pause after a failed pass, however often passes fail: the relay keeps trying, never in a hot loop. */
const MAX_ERROR_PAUSE_MS = 60_000

/** Where a project's relay is: each state changes in one place of {@link runSource}. */
export type SourceState = 'moving' | 'idle' | 'failing' | 'stopped'

/** A project's relay as its health endpoint tells it. */
export type SourceHealth = {
  project: string
  state: SourceState
  movedTotal: number
  refused: number
  lastPassAt: string | null
  lastError: string | null
}

/** The relay's dependencies: Actions' pool, a logger, metrics, and the signals that wake dispatch (absent: the sweeper re-drives). */
export type RelayDeps = { actions: pg.Pool; log: Logger; metrics: RelayMetrics; signals?: Signals }

/** A running relay. */
export type Relay = {
  health(): SourceHealth[]
  /** Whether every project's last pass succeeded. */
  healthy(): boolean
  /** Stops every loop after its current batch (committed or rolled back), closes connections. */
  stop(): Promise<void>
}

/** Thrown at start when an outbox is not the one this relay knows, or a database cannot be read. */
export class RelayStartError extends Error {
  override name = 'RelayStartError'
}

/**
 * Starts one loop per source after checking, for every source, that its outbox has exactly the
 * columns engine 2.0.8 writes (else RelayStartError listing every problem, nothing moved).
 */
export async function startRelay(deps: RelayDeps, sources: RelaySource[], options: RelayOptions = DEFAULT_RELAY_OPTIONS): Promise<Relay> {
  const pools = sources.map(s => createPool(s.url, options.poolMax, options.pool))
  try {
    const problems: string[] = []
    for (const [i, source] of sources.entries()) {
      const pool = pools[i]
      if (!pool) continue
      for (const p of await outboxColumnProblems(pool)) problems.push(`${source.project}: ${p}`)
    }
    if (problems.length)
      throw new RelayStartError(
        `The outbox (system.actions_event) is not the one @contember/engine-server 2.0.8 writes; the relay does not guess what its rows mean:\n${problems.map(p => `  - ${p}`).join('\n')}`,
      )
    for (const [i, source] of sources.entries()) {
      const pool = pools[i]
      if (pool) deps.log.info('Relay starting', { project: source.project, outbox: await outboxStates(pool) })
    }
  } catch (e) {
    await Promise.allSettled(pools.map(p => p.end()))
    if (e instanceof RelayStartError) throw e
    throw new RelayStartError(`The relay could not read a Contember database: ${describeError(e).message}`, { cause: e })
  }
  const loops = sources.map((source, i) => runSource(deps, source, pools[i] as pg.Pool, options))
  return {
    health: () => loops.map(l => l.health()),
    healthy: () => loops.every(l => l.health().state === 'moving' || l.health().state === 'idle'),
    stop: async () => {
      await Promise.all(loops.map(l => l.stop()))
      await Promise.allSettled(pools.map(p => p.end()))
    },
  }
}

type Loop = { health(): SourceHealth; stop(): Promise<void> }

/** The loop of one project: follow the schema, move batches while there are rows, then wait for a notification or the poll interval. */
function runSource(deps: RelayDeps, source: RelaySource, pool: pg.Pool, options: RelayOptions): Loop {
  const { project } = source
  const log = deps.log.child({ project })
  const metrics = deps.metrics.forProject(project)
  const h: SourceHealth = { project, state: 'moving', movedTotal: 0, refused: 0, lastPassAt: null, lastError: null }
  let stopping = false
  let wake: (() => void) | undefined
  let woken = false
  // `wakeable`: a notification ends the wait (an idle wait); a pause after an error ends only on stop.
  const sleep = (ms: number, wakeable = true) =>
    new Promise<void>(resolve => {
      if (stopping || (wakeable && woken)) {
        woken = false
        return resolve()
      }
      const timer = setTimeout(done, ms)
      function done() {
        clearTimeout(timer)
        wake = undefined
        woken = false
        resolve()
      }
      wake = done
      pokeable = wakeable
    })
  let pokeable = true
  const poke = () => {
    woken = true
    if (pokeable || stopping) wake?.()
  }
  const listener = options.listen ? listen(source, options, log, poke, () => stopping) : undefined

  const loop = (async () => {
    let checksum: string | undefined
    let failures = 0
    let skip: string[] = []
    while (!stopping) {
      try {
        const followed = await followSchema(pool, deps.actions, project, checksum)
        if (followed.storedVersion !== undefined) {
          log.info("Stored the engine's deployed actions schema as a new Actions schema version", { version: followed.storedVersion })
          skip = []
        }
        checksum = followed.checksum
        if (skip.length === 0) skip = await refusedIds(deps.actions, project, MAX_SKIPPED_REFUSED)
        const result = await moveBatch({ source: pool, actions: deps.actions }, project, skip, options.batchSize)
        skip = report(result, skip)
        h.state = 'moving'
        h.lastPassAt = new Date().toISOString()
        h.lastError = null
        failures = 0
        // A full batch that made progress: more may wait. Otherwise wait for a notification or the poll.
        if (result.taken === options.batchSize && (result.moved.length > 0 || result.refused.length > 0) && !stopping) continue
        h.state = 'idle'
        await sleep(options.pollIntervalMs)
      } catch (e) {
        failures++
        h.state = 'failing'
        h.lastError = describeError(e).message
        metrics.failedPass()
        log.error('Relay pass failed; trying again', { error: e, failures })
        await sleep(Math.min(options.pollIntervalMs * 2 ** Math.min(failures - 1, 10), MAX_ERROR_PAUSE_MS), false)
      }
    }
    h.state = 'stopped'
  })()

  // Logs, counts and signals one move; returns the refused ids to skip from now on.
  function report(result: MoveResult, skip: string[]): string[] {
    if (result.moved.length > 0) {
      h.movedTotal += result.moved.length
      metrics.moved(result.written)
      log.debug('Relay moved rows', { moved: result.moved.length, written: result.written })
      void deps.signals
        ?.send(project)
        .catch(error => log.error('Could not signal the dispatch queue; the sweeper will pick the events up', { error }))
    }
    for (const r of result.refused)
      log.warn("Relay left a row in the engine's outbox", { eventId: r.eventId, target: r.target, trigger: r.trigger, reason: r.reason })
    if (result.refused.length === 0) return skip
    const next = [...new Set([...skip, ...result.refused.map(r => r.eventId)])]
    if (next.length > MAX_SKIPPED_REFUSED)
      log.error(
        `More than ${MAX_SKIPPED_REFUSED} refused rows wait in the outbox; the rest are read again on every pass: fix them (actions relay refused)`,
        {
          refused: next.length,
        },
      )
    h.refused = next.length
    metrics.refused(next.length)
    return next.slice(0, MAX_SKIPPED_REFUSED)
  }

  return {
    health: () => ({ ...h }),
    stop: async () => {
      stopping = true
      poke()
      await loop
      await listener?.close()
    },
  }
}

/**
 * A dedicated connection that LISTENs on the engine's channel and pokes the loop on each notification;
 * on a lost connection it reconnects after the poll interval (the poll covers the gap meanwhile). It
 * comes from a one-connection pool of its own, so it has the TLS and timeouts of the others.
 */
function listen(
  source: RelaySource,
  options: RelayOptions,
  log: Logger,
  poke: () => void,
  stopping: () => boolean,
): { close(): Promise<void> } {
  const pool = createPool(source.url, 1, options.pool)
  let client: pg.PoolClient | undefined
  let timer: NodeJS.Timeout | undefined
  const connect = async () => {
    if (stopping()) return
    try {
      const c = await pool.connect()
      if (stopping()) return c.release(true)
      client = c
      c.on('error', () => retry())
      c.on('notification', () => poke())
      await c.query(`LISTEN ${OUTBOX_CHANNEL}`)
      // Rows written while we were not listening are found by this look.
      poke()
    } catch (error) {
      log.warn('Relay could not LISTEN; polling meanwhile', { error })
      retry()
    }
  }
  const retry = () => {
    const c = client
    client = undefined
    // Released as broken: the pool opens a fresh connection next time.
    c?.release(true)
    if (!stopping() && timer === undefined)
      timer = setTimeout(() => {
        timer = undefined
        void connect()
      }, options.pollIntervalMs)
  }
  void connect()
  return {
    close: async () => {
      if (timer) clearTimeout(timer)
      client?.release(true)
      client = undefined
      await pool.end().catch(() => {})
    },
  }
}
