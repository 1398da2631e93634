import pg from 'pg'
import type { Queryable } from '../db/pool.js'
import { recordMinimal } from '../db/record-minimal.js'
import { recordAttempts, type AttemptRecord, type RecordedRow } from '../db/record.js'
import type { RecordSettings } from '../db/health.js'
import { progressRhythm, touchProgress } from '../db/progress.js'
import { addTrends } from '../db/trends.js'
import type { Logger } from '../log.js'
import { trendAdds } from './trend-rollup.js'

/** What an attempt is recorded with when its own entry cannot be stored: the attempt still counts. */
export const UNRECORDABLE = 'Unrecordable response'

/**
 * Outcomes worth one write of their own: fewer wait up to RECORD_LINGER_MS after the first of them
 * arrived (a flush writes at once). Without it, writes ran back to back with whatever had arrived
 * (19 outcomes each at batchSize 1; 7 with four processes on one project), and record statements were
 * nine in ten of the drain's statements, each a commit (`actions-b1`: 0.076 → 0.015 statements per
 * event and 5,377 → 6,953 events/s; `scale-4x1`: 4,176 → 6,630/s).
 */
export const RECORD_MIN_OUTCOMES = 256
/** The longest an outcome waits for company before it is written; it delays no delivery, only its record. */
export const RECORD_LINGER_MS = 20

type OnRecorded = (rows: RecordedRow[], records: ReadonlyMap<string, AttemptRecord>) => void

/**
 * Collects outcomes from concurrent deliveries and writes them with as few statements as possible:
 * one write runs at a time, and everything that arrived meanwhile goes into the next one, which waits
 * a few milliseconds for company when it would be small (RECORD_MIN_OUTCOMES). A statement the
 * database refuses for its data is written again row by row, so one bad row costs only itself.
 */
export function createRecorder(db: Queryable, onRecorded: OnRecorded, log?: Logger, settings?: RecordSettings): Recorder {
  return new Recorder(db, onRecorded, log, settings)
}

class Recorder {
  private pending: AttemptRecord[] = []
  // When the oldest pending outcome arrived: the linger counts from there.
  private firstAt = 0
  // Each add() is one delivered batch: the circuit breaker counts failed batches.
  private batches = 0
  private running: Promise<void> | undefined
  private lingering: NodeJS.Timeout | undefined
  // Flushes under way: while any waits, pending outcomes are written without lingering.
  private flushing = 0
  // Outcomes that must be written without lingering are pending (a capped target's slot frees only then).
  private urgent = false
  private failure: unknown
  // Recorded outcomes are dispatch's progress: the sweeper's heartbeat reads it (docs/operations.md).
  private readonly progress = progressRhythm()

  constructor(
    private readonly db: Queryable,
    private readonly onRecorded: OnRecorded,
    private readonly log: Logger | undefined,
    private readonly settings: RecordSettings | undefined,
  ) {}

  /**
   * Queues outcomes for writing; throws if an earlier write failed. `now`: write them without waiting
   * for company (a target with maxInFlight gets its slot back only once its outcome is written).
   */
  add(records: AttemptRecord[], now = false): void {
    if (this.failure) throw this.failure
    if (now) this.urgent = true
    const batch = ++this.batches
    if (this.pending.length === 0) this.firstAt = performance.now()
    this.pending.push(...records.map(r => ({ ...r, batch })))
    this.kick()
  }

  /** Outcomes queued or being written. */
  backlog(): number {
    return this.pending.length + (this.running ? 1 : 0)
  }

  /** Writes everything queued at once, waits until it is written; throws the first write failure. */
  async flush(): Promise<void> {
    this.flushing++
    try {
      this.kick()
      while (this.running) {
        await this.running
        this.kick()
      }
    } finally {
      this.flushing--
    }
    if (this.failure) throw this.failure
  }

  /** Starts the next write when one is due: enough outcomes, a flush waiting, or the linger over. */
  private kick(): void {
    if (this.running || this.failure || this.pending.length === 0) return
    const wait = this.firstAt + RECORD_LINGER_MS - performance.now()
    if (this.flushing === 0 && !this.urgent && this.pending.length < RECORD_MIN_OUTCOMES && wait > 0) {
      this.lingering ??= setTimeout(() => {
        this.lingering = undefined
        this.kick()
      }, wait)
      return
    }
    clearTimeout(this.lingering)
    this.lingering = undefined
    this.urgent = false
    this.running = this.write()
      .catch(e => {
        this.failure ??= e
      })
      .finally(() => {
        this.running = undefined
        this.kick()
      })
  }

  private async write(): Promise<void> {
    const batch = this.pending
    this.pending = []
    const touch = this.progress.due()
    const { rows, written } = await recordAll(this.db, batch, this.log, this.settings, touch)
    if (touch && rows.length > 0) this.progress.written()
    const records = new Map(written.map(r => [r.id, r]))
    await writeTrends(this.db, rows, records, this.log)
    this.onRecorded(rows, records)
  }
}

/**
 * The trend rollup of a record write, its own statement after it (lib/db/trends.ts). The events are
 * recorded by then: a trend that cannot be written is a gap in a chart, logged, never a failed record.
 */
async function writeTrends(db: Queryable, rows: RecordedRow[], records: ReadonlyMap<string, AttemptRecord>, log?: Logger): Promise<void> {
  try {
    await addTrends(db, trendAdds(rows, records))
  } catch (e) {
    log?.warn('Could not write the trend rollup; the chart misses these outcomes', {
      sqlState: sqlState(e),
      errorName: e instanceof Error ? e.name : typeof e,
    })
  }
}

/**
 * Writes a batch in one statement; if the database refuses it for its data, writes each record alone,
 * and a record refused again by its last resort ({@link recordOne}). Faults of the database itself
 * (connection, shutdown, resources) are thrown: nothing can be written then. With `progress`, the
 * projects' dispatch progress is written too when any row changed. Returns the rows changed and the
 * records as written (an attempt no statement could record is in neither: its lease runs out and the
 * claim counts it).
 */
export async function recordAll(
  db: Queryable,
  batch: AttemptRecord[],
  log?: Logger,
  settings?: RecordSettings,
  progress = false,
): Promise<{ rows: RecordedRow[]; written: AttemptRecord[] }> {
  try {
    return { rows: await recordAttempts(db, batch, settings, { progress }), written: batch }
  } catch (e) {
    if (!refusedForData(e)) throw e
    // The SQLSTATE only: a database message may quote the offending (receiver) text.
    log?.warn('Recording attempts failed; recording them one by one', { attempts: batch.length, sqlState: sqlState(e) })
  }
  const rows: RecordedRow[] = []
  const written: AttemptRecord[] = []
  for (const record of batch) {
    const one = await recordOne(db, record, settings, log)
    if (!one) continue
    rows.push(...one.rows)
    written.push(one.written)
  }
  // Row by row is the rare path: its progress is one statement of its own, as all of it was before.
  if (progress && rows.length > 0) {
    for (const project of new Set(written.map(r => r.project))) await touchProgress(db, project)
  }
  return { rows, written }
}

/**
 * One record, in two steps: with its log entry and the target's health, then, if the database refuses
 * that for its data, the event row alone with a minimal entry ({@link UNRECORDABLE}: the attempt
 * counts; an uncounted one would be redelivered after every lease, forever). If even that is refused,
 * nothing is written and undefined returned: the event stays claimed until its lease runs out, and the
 * claim then counts the attempt (lib/db/claim.ts, LEASE_EXPIRED). Never throws for data.
 */
export async function recordOne(
  db: Queryable,
  record: AttemptRecord,
  settings?: RecordSettings,
  log?: Logger,
): Promise<{ rows: RecordedRow[]; written: AttemptRecord } | undefined> {
  let refused: string | undefined
  try {
    return { rows: await recordAttempts(db, [record], settings), written: record }
  } catch (e) {
    if (!refusedForData(e)) throw e
    refused = sqlState(e)
  }
  const written: AttemptRecord = record.outcome.ok
    ? record
    : {
        ...record,
        outcome: { ok: false, ...(record.outcome.code !== undefined ? { code: record.outcome.code } : {}), errorMessage: UNRECORDABLE },
      }
  try {
    const rows = await recordMinimal(db, record, UNRECORDABLE)
    log?.error('Could not record an attempt with its log entry; recorded a minimal one', { eventId: record.id, sqlState: refused })
    return { rows, written }
  } catch (e) {
    if (!refusedForData(e)) throw e
    log?.error('Could not record an attempt at all; it is counted when its lease runs out', {
      eventId: record.id,
      sqlState: refused,
      minimalSqlState: sqlState(e),
    })
    return undefined
  }
}

/** SQLSTATE classes that mean the database itself is unwell, not that the statement's data was refused. */
const DATABASE_FAULTS = new Set(['08', '53', '57', '58'])

function refusedForData(e: unknown): boolean {
  const code = sqlState(e)
  return code !== undefined && !DATABASE_FAULTS.has(code.slice(0, 2))
}

/** The SQLSTATE of an error the server sent; client-side and network errors have none. */
function sqlState(e: unknown): string | undefined {
  return e instanceof pg.DatabaseError ? e.code : undefined
}
