import type { Queryable } from './pool.js'
import type { ClaimedEvent } from '../events.js'
import { DUE, headOfKey } from './due.js'
import { DEFAULT_RECORD_SETTINGS } from './health.js'
import { named } from './sql.js'
import { TARGET_DEFAULTS } from '../schema/actions.js'
import { appendedLog, droppedAfterAppend } from './log.js'

/** What the claim needs to know of each target the schema defines. */
export type TargetClaimConfig = {
  name: string
  batchSize: number
  leaseMs: number
  /** Batches of this target one claim may take at most, so one target cannot fill a drain's queue alone. */
  maxBatches: number
  /** Attempts an event of this target may have (a lost attempt that is the last fails the event); default upstream's 10. */
  maxAttempts?: number
  /** Caps (lib/db/flow.ts): claimed through claimWithCaps, which holds the claim to them. */
  maxInFlight?: number
  maxPerSecond?: number
}

/** Events of one target claimed together, most urgent first; each carries its lease, the fencing token of its record. */
export type ClaimedBatch = {
  target: string
  events: ClaimedEvent[]
  /** Payload bytes, serialized: what holding the batch costs. */ bytes: number
}

/** What one claim may take besides its batch count. */
export type ClaimLimits = {
  /** Targets in the schema whose events must wait (held back, or too slow for the time left): neither claimed nor failed. */
  waiting: readonly string[]
  /** Payload bytes the claimed batches may add up to. */
  budgetBytes: number
  /** Take the first batch even when it alone crosses the budget, so an oversized batch cannot stall a drain holding nothing. */
  atLeastOne: boolean
}

export type ClaimResult = {
  batches: ClaimedBatch[]
  /** Events whose target is not in the schema: already failed terminally by the claim, without a request. */
  unknownTarget: ClaimedEvent[]
  /** Events whose lost attempt ({@link LEASE_EXPIRED}) was their last: failed terminally by the claim. */
  spent: ClaimedEvent[]
  /** Lost attempts the claim counted, `spent` included (each a failed attempt for the metrics). */
  lost: number
}

/**
 * A timestamptz column as UTC text (`2024-02-29 23:59:59.123456`: DateStyle ISO, which node-postgres
 * requires anyway), for {@link jsDateText}. Exists for speed: against node-postgres parsing both columns
 * into Dates, 5.1 µs less dispatcher CPU per event in `actions-b50` (of ~18), interleaved A/B on the
 * bundle. The cast costs Postgres less than half of `to_char` (0.23
 * against 0.55 µs a value over 120,000 rows), and a claim formats two per row.
 */
export const utcText = (column: string) => `(${column} AT TIME ZONE 'UTC')::text`

/**
 * {@link utcText}'s text as JSON.stringify writes the Date node-postgres reads from the column:
 * `2024-02-29T23:59:59.123Z`, milliseconds truncated. Text of another shape (BC dates, infinity: never
 * written by Actions, whose timestamps are the database's now()) is returned as it is.
 */
export function jsDateText(utc: string): string {
  // Postgres drops trailing zeros of the fraction; with all six digits the text is a fixed layout.
  if (utc.length === 26 && utc[10] === ' ' && utc[19] === '.') return `${utc.slice(0, 10)}T${utc.slice(11, 23)}Z`
  const m = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?$/.exec(utc)
  return m ? `${m[1]}T${m[2]}.${(m[3] ?? '').padEnd(3, '0').slice(0, 3)}Z` : utc
}

/** The log entry of an attempt whose outcome was never recorded (its dispatcher died, or no record could be written). */
export const LEASE_EXPIRED = 'Lease expired before the attempt was recorded'

/** The claim's parameters; the per-target arrays are parallel to `targets`. */
type ClaimParams = {
  project: string
  targets: string[]
  batch_sizes: number[]
  lease_ms: number[]
  /** Due events read as candidates at most (enough for every batch at the largest batch size). */
  candidate_rows: number
  max_batches: number
  /** Targets whose events wait: neither claimed nor failed. */
  waiting: readonly string[]
  budget_bytes: number
  /** Batches taken whatever the budget: 1 or 0. */
  take_anyway: number
  batches_per_target: number[]
  attempts_per_target: number[]
}

/**
 * The claim (see {@link claimBatches}); test/fixtures/sql/claim.sql holds it whole, as sent.
 * Health first: `probing` is the paused targets whose probe is due and that have a due event; its
 * guarded UPDATE advances `probe_at` by the current interval, so a concurrent claim (which waits for
 * the row, then re-checks `probe_at <= now()`) never probes the same target twice. `blocked` is the
 * paused targets not probing now and those a receiver's Retry-After holds (`hold_until`, migration
 * 007): their events are not claimed. The RETURNING list is only what the body and the record need:
 * the payload as text and the timestamps as UTC text, so neither is parsed per event.
 */
export const CLAIM = named<ClaimParams>()(
  [
    'project',
    'targets',
    'batch_sizes',
    'lease_ms',
    'candidate_rows',
    'max_batches',
    'waiting',
    'budget_bytes',
    'take_anyway',
    'batches_per_target',
    'attempts_per_target',
  ],
  `WITH cfg AS (
    SELECT * FROM unnest($targets::text[], $batch_sizes::int[], $lease_ms::int[], $batches_per_target::int[], $attempts_per_target::int[]) AS c(target, batch_size, lease_ms, max_batches, max_attempts)
  ),
  probing AS (
    UPDATE actions_target_health h
    SET probe_at = now() + coalesce(h.probe_interval_ms, ${DEFAULT_RECORD_SETTINGS.probeMs}) * interval '1 millisecond', probe_claimed_at = now(), updated_at = now()
    WHERE h.project = $project AND h.paused_at IS NOT NULL AND h.probe_at <= now() AND h.target = ANY($targets::text[])
      AND (h.hold_until IS NULL OR h.hold_until <= now())
      -- Ordered and limited as the due index is, so it probes the index per paused target instead of
      -- becoming a semi-join over a sequential scan of the whole table.
      AND EXISTS (SELECT 1 FROM actions_event d WHERE d.project = $project AND d.target = h.target
                  AND ${DUE} ORDER BY d.priority DESC, d.visible_at LIMIT 1)
    RETURNING h.target
  ),
  blocked AS (
    SELECT target FROM actions_target_health
    WHERE project = $project AND ((paused_at IS NOT NULL AND target NOT IN (SELECT target FROM probing)) OR hold_until > now())
  ),
  candidates AS (
    -- lost: claimed before and its lease ran out with no record. The attempt may have reached the
    -- receiver, so it counts (below): a delivery that kills its dispatcher, or whose record cannot be
    -- written, ends after maxAttempts like any other failure instead of being sent again forever.
    SELECT ctid AS row_at, id, project, target, priority, visible_at, seq, num_retries, batch_cap, state = 'processing' AS lost, octet_length(payload::text) AS bytes,
           -- The change before this claim: upstream's meta.lastStateChange (RETURNING, below).
           last_state_change AS changed
    FROM actions_event
    WHERE project = $project AND ${DUE}
      AND target <> ALL($waiting::text[])
      -- A paused target's events wait, attempts untouched (the circuit breaker), except one probe batch.
      -- An anti-join on purpose: the planner cannot estimate "target <> ALL(ARRAY(SELECT ...))", takes
      -- it for "no row left", and scans and sorts the whole backlog instead of reading the due index.
      AND NOT EXISTS (SELECT 1 FROM blocked b WHERE b.target = actions_event.target)
      -- Per-entity order: only the earliest unresolved event of an ordering key (lib/db/due.ts).
      AND ${headOfKey('actions_event')}
    ORDER BY priority DESC, visible_at, seq
    LIMIT $candidate_rows
    FOR NO KEY UPDATE SKIP LOCKED
  ),
  ranked AS (
    -- spent: a lost attempt that was the event's last; it fails here, like an event of an unknown target.
    -- size: the batch the event may travel in, the target's batchSize or less after a split (batch_cap).
    SELECT row_at, id, project, target, bytes, lost, changed, batch_size, lease_ms, max_batches, spent, size,
           -- A probe is one batch: the one holding the target's most urgent event (its size group).
           first_value(size) OVER (PARTITION BY target ORDER BY priority DESC, visible_at, seq) AS lead_size,
           row_number() OVER (ORDER BY priority DESC, visible_at, seq) AS pos,
           (row_number() OVER (PARTITION BY target, spent, size ORDER BY priority DESC, visible_at, seq) - 1) / size AS chunk
    FROM (SELECT c.*, cfg.batch_size, cfg.lease_ms, cfg.max_batches, coalesce(c.lost AND c.num_retries + 1 >= cfg.max_attempts, false) AS spent,
                 least(coalesce(cfg.batch_size, 1), coalesce(c.batch_cap, cfg.batch_size, 1)) AS size
          FROM candidates c LEFT JOIN cfg ON cfg.target = c.target) c
  ),
  -- Batches are chosen in one pass of window functions over the candidates, never by joining the rows
  -- back to a list of batches: statistics taken while the queue was empty make the planner expect one
  -- candidate, and such a join became a nested loop recomputing the batch list per row (quadratic: 40 ms
  -- for 128 rows). Each row carries its batch's first position (the batch's place in claim order), the
  -- batch's ordinal and the running byte total of all batches up to and including its own.
  grouped AS (
    SELECT row_at, id, project, pos, bytes, lost, changed, lease_ms, min(pos) OVER (PARTITION BY target, size, chunk) AS first_pos
    FROM ranked WHERE batch_size IS NOT NULL AND NOT spent AND chunk < max_batches
      AND ((chunk = 0 AND size = lead_size) OR target NOT IN (SELECT target FROM probing))
  ),
  ordered AS (
    SELECT row_at, id, project, pos, bytes, lost, changed, lease_ms, first_pos,
           dense_rank() OVER (ORDER BY first_pos) AS n,
           -- RANGE framing (the default with ORDER BY) counts a batch's rows as peers: the whole batch at once.
           sum(bytes) OVER (ORDER BY first_pos) AS running_bytes
    FROM grouped
  ),
  picked AS (
    -- At most $max_batches batches, while their running byte total stays within the budget (or among the first $take_anyway).
    SELECT row_at, id, project, pos, bytes, lost, changed, lease_ms, first_pos, NULL::text AS gave_up FROM ordered WHERE n <= $max_batches AND (running_bytes <= $budget_bytes OR n <= $take_anyway)
    UNION ALL
    SELECT row_at, id, project, pos, bytes, lost, changed, NULL, NULL, CASE WHEN batch_size IS NULL THEN 'unknown' ELSE 'spent' END FROM ranked WHERE batch_size IS NULL OR spent
  )
  UPDATE actions_event e SET
    state = CASE WHEN p.first_pos IS NULL THEN 'failed' ELSE 'processing' END::actions_event_state,
    -- The lease goes where no index looks (migration 017): claiming an event is a HOT update.
    lease_until = CASE WHEN p.first_pos IS NULL THEN NULL
                       ELSE date_trunc('milliseconds', now() + p.lease_ms * interval '1 millisecond') END,
    resolved_at = CASE WHEN p.first_pos IS NULL THEN now() ELSE e.resolved_at END,
    failed_at = CASE WHEN p.first_pos IS NULL THEN now() ELSE e.failed_at END,
    -- Upstream's unknown-target failure: the attempt counts, the entry has no durationMs (no request was
    -- made). A lost attempt counts too, once, whatever else the claim does with the event.
    num_retries = CASE WHEN p.first_pos IS NULL OR p.lost THEN e.num_retries + 1 ELSE e.num_retries END,
    log = CASE WHEN p.gave_up = 'unknown'
               THEN ${appendedLog('e', `jsonb_build_object('ok', false, 'errorMessage', 'Event target ' || e.target || ' not found, stopping.')`)}
               WHEN p.lost THEN ${appendedLog('e', `jsonb_build_object('ok', false, 'errorMessage', '${LEASE_EXPIRED}')`)}
               ELSE e.log END,
    log_dropped = CASE WHEN p.gave_up = 'unknown' OR p.lost THEN ${droppedAfterAppend('e')} ELSE e.log_dropped END,
    first_failed_at = CASE WHEN p.lost THEN coalesce(e.first_failed_at, now()) ELSE e.first_failed_at END,
    last_state_change = now()
  FROM picked p
  -- Each row where the candidates' scan found and locked it (its ctid: no other statement can move a row
  -- this one holds locked), read as a TID list: joined by id or by ctid alone, the planner chose a hash
  -- join over a sequential scan of the whole table whenever it was small (a fresh deployment's, the
  -- bench's 20,000 rows), two thirds of an 800-row claim. A row another statement changed after this
  -- one's snapshot is locked at its new version, which this statement cannot see: it is left out of
  -- the claim, still due, for the next one.
  WHERE e.ctid = ANY(ARRAY(SELECT row_at FROM picked)) AND e.ctid = p.row_at
  -- last_state_change is the one the row had before this claim (p.changed), as upstream's claim returns
  -- it: its meta.lastStateChange, the creation on a first attempt, the last failure on a retry.
  RETURNING e.id, e.transaction_id, e.num_retries, e.target, e.trigger, e.identity_id, e.ip_address, e.user_agent, e.lease_until::text AS lease,
  ${utcText('e.created_at')} AS created_at, ${utcText('p.changed')} AS last_state_change, e.payload::text AS payload,
  e.traceparent, e.tracestate, p.first_pos, p.pos, p.bytes, p.lost, p.gave_up`,
)
/** {@link CLAIM}'s text (bench/profile.ts tells statements apart by it). */
export const CLAIM_SQL = CLAIM.text

/**
 * Claims up to `maxBatches` batches of a project's due events in one statement, as if taken one by one:
 * the most urgent due event (priority desc, then due time, then arrival: a request's events in the
 * producer's order) plus up to batchSize − 1 more due events of
 * the same target, then the most urgent event left, and so on. Rows are locked with SKIP LOCKED so
 * concurrent dispatchers never claim the same event, and the statement commits on its own, so no lock
 * outlives it. Claimed events become `processing` until `now() + leaseMs` (rounded to the millisecond),
 * returned as Postgres' text: the lease, the record's exact fencing token. Due events of targets
 * missing from the schema are failed terminally in the same statement (upstream's rule: the attempt
 * counts, no request is made). Events of `limits.waiting` targets are left as they are, and so are
 * those of targets the circuit breaker paused (lib/db/health.ts), except one probe batch once the
 * target's `probe_at` is due; a target gets at most its `maxBatches`. Batches stop before their payload
 * bytes would cross `limits.budgetBytes`, except the first when `limits.atLeastOne`. An event whose
 * lease ran out unrecorded has its lost attempt counted here ({@link LEASE_EXPIRED}); when that was its
 * last, it fails terminally instead of being claimed (`spent`).
 */
export async function claimBatches(
  db: Queryable,
  project: string,
  targets: readonly TargetClaimConfig[],
  maxBatches: number,
  limits: ClaimLimits,
): Promise<ClaimResult> {
  // No more batches than the targets may take between them: a capped target granted one request
  // would otherwise read and lock a whole look-ahead of its rows (256 at batchSize 1) to update one.
  const allowed = Math.min(
    maxBatches,
    targets.reduce((n, t) => n + t.maxBatches, 0),
  )
  const { rows } = await db.query<
    ClaimedEvent & { first_pos: string | null; pos: string; bytes: number; lost: boolean; gave_up: 'unknown' | 'spent' | null }
  >({
    // Prepared once per connection: under load the claim runs hundreds of times a second.
    name: 'actions_claim',
    text: CLAIM.text,
    values: CLAIM.values({
      project,
      targets: targets.map(t => t.name),
      batch_sizes: targets.map(t => t.batchSize),
      lease_ms: targets.map(t => t.leaseMs),
      candidate_rows: allowed * Math.max(1, ...targets.map(t => t.batchSize)),
      max_batches: allowed,
      waiting: limits.waiting,
      budget_bytes: limits.budgetBytes,
      take_anyway: limits.atLeastOne ? 1 : 0,
      batches_per_target: targets.map(t => t.maxBatches),
      attempts_per_target: targets.map(t => t.maxAttempts ?? TARGET_DEFAULTS.maxAttempts),
    }),
  })
  const unknownTarget: ClaimedEvent[] = []
  const spent: ClaimedEvent[] = []
  let lost = 0
  const byBatch = new Map<string, { target: string; first: number; bytes: number; events: Array<{ pos: number; row: ClaimedEvent }> }>()
  for (const { first_pos, pos, bytes, lost: wasLost, gave_up, ...row } of rows) {
    row.created_at = jsDateText(row.created_at)
    row.last_state_change = jsDateText(row.last_state_change)
    if (wasLost) lost++
    if (first_pos === null) {
      ;(gave_up === 'spent' ? spent : unknownTarget).push(row)
      continue
    }
    let batch = byBatch.get(first_pos)
    if (!batch) byBatch.set(first_pos, (batch = { target: row.target, first: Number(first_pos), bytes: 0, events: [] }))
    batch.bytes += bytes
    batch.events.push({ pos: Number(pos), row })
  }
  const batches = [...byBatch.values()]
    .sort((a, b) => a.first - b.first)
    .map(b => ({ target: b.target, bytes: b.bytes, events: b.events.sort((x, y) => x.pos - y.pos).map(x => x.row) }))
  return { batches, unknownTarget, spent, lost }
}
