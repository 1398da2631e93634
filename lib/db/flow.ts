import type pg from 'pg'
import { claimBatches, type ClaimLimits, type ClaimResult, type TargetClaimConfig } from './claim.js'
import { withTransaction } from './pool.js'
import { named } from './sql.js'

/**
 * Per-target caps (migration 008), enforced by the database across every drain:
 * `maxInFlight` requests at once, `maxPerSecond` requests started per second. A claim of capped
 * targets runs in a transaction that first locks their rows of actions_target_flow, so such claims run
 * one at a time and each sees what the ones before it took. Uncapped targets never come here.
 */

/** How far ahead a rate-capped batch may be claimed: it then waits in its worker until its start time. */
export const RATE_LOOKAHEAD_MS = 500
/**
 * Requests of a rate-capped target are scheduled this much wider apart than the rate: a request sent
 * later than its slot (a busy worker, a timer's lateness) lets the next ones crowd behind it, and 5 %
 * absorbs up to about 100 ms of such lateness before a second could see more than maxPerSecond + 1.
 */
export const RATE_SPACING = 1.05

/** What a claim of capped targets tells the claim queue about each of them. */
export type FlowOutcome = {
  /** When each claimed batch of the target may start, in ms from now: its requests are spaced by the rate. */
  startsInMs: number[]
  /**
   * Why the target got fewer batches than it asked for, when a cap (not a lack of due events) cut it:
   * `rate` with the ms until the next request may start, or `in-flight` (another request must end first).
   */
  capped?: { by: 'rate'; inMs: number } | { by: 'in-flight' }
}

/** A request granted to a target: its batch's first event and lease (the row's `in_flight` list). */
type Granted = { id: string; lease: string }

/** The capped targets' rows, created the first time a target is capped. */
export const FLOW_CREATE = named<{ project: string; targets: readonly string[] }>()(
  ['project', 'targets'],
  `INSERT INTO actions_target_flow (project, target) SELECT $project, t FROM unnest($targets::text[]) AS t ON CONFLICT DO NOTHING`,
)

/**
 * The capped targets' rows, locked in name order (two claims cannot deadlock); a claim
 * that waited here reads the row as the claim before it left it. A lock, not an upsert: an upsert
 * writes a row version per claim, and hundreds a second of them slowed every claim of the target. The
 * rate's schedule runs on clock_timestamp(), the time now, not now(), the transaction's start, which is
 * before any wait for the lock: a schedule from that would crowd requests together.
 */
export const FLOW_LOCK = named<{ project: string; targets: readonly string[] }>()(
  ['project', 'targets'],
  `SELECT target, (extract(epoch FROM next_start_at - clock_timestamp()) * 1000)::float8 AS tat_in_ms,
    clock_timestamp()::text AS locked_at, in_flight
  FROM actions_target_flow WHERE project = $project AND target = ANY($targets::text[])
  ORDER BY target
  FOR UPDATE`,
)

/**
 * Which granted requests (by target, the batch's first event id and its lease) are still in flight (the
 * batch's first event still `processing` under its lease, the lease not run out). A statement of its
 * own, after the lock, so its snapshot holds every claim committed before.
 */
export const FLOW_IN_FLIGHT = named<{ project: string; targets: readonly string[]; ids: readonly string[]; leases: readonly string[] }>()(
  ['project', 'targets', 'ids', 'leases'],
  `SELECT g.target, g.id::text AS id, g.lease::text AS lease
  FROM unnest($targets::text[], $ids::uuid[], $leases::timestamptz[]) AS g(target, id, lease)
  JOIN actions_event e ON e.id = g.id AND e.project = $project
  WHERE e.state = 'processing' AND e.lease_until = g.lease AND g.lease > now()`,
)

/**
 * What this claim leaves in the rows, by target: its requests in flight now (`in_flight`, jsonb lists),
 * requests started now (`started`) and the ms between requests (`interval_ms`, 0: no rate); the rate's
 * schedule runs on from when the rows were locked (`locked_at`).
 */
export const FLOW_SAVE = named<{
  project: string
  targets: readonly string[]
  in_flight: readonly string[]
  started: readonly number[]
  interval_ms: readonly number[]
  locked_at: string
}>()(
  ['project', 'targets', 'in_flight', 'started', 'interval_ms', 'locked_at'],
  `UPDATE actions_target_flow f
  SET in_flight = a.in_flight, claimed_at = now(),
      next_start_at = CASE WHEN a.interval_ms > 0 AND a.n > 0
                           THEN greatest(coalesce(f.next_start_at, '-infinity'), $locked_at::timestamptz) + a.n * a.interval_ms * interval '1 millisecond'
                           ELSE f.next_start_at END
  FROM unnest($targets::text[], $in_flight::jsonb[], $started::int[], $interval_ms::float8[]) AS a(target, in_flight, n, interval_ms)
  WHERE f.project = $project AND f.target = a.target`,
)

/** Whether the target has a cap of either kind. */
export const isCapped = (t: TargetClaimConfig) => t.maxInFlight !== undefined || t.maxPerSecond !== undefined

type Grant = { batches: number; limit?: FlowOutcome['capped']; firstInMs: number; intervalMs: number }

/** What the caps let a target take now, given its requests in flight and the ms until the rate lets the next start. */
function grantOf(t: TargetClaimConfig, inFlight: number, tatInMs: number | null): Grant {
  let batches = t.maxBatches
  let limit: FlowOutcome['capped']
  if (t.maxInFlight !== undefined) {
    const free = Math.max(0, t.maxInFlight - inFlight)
    if (free < batches) {
      batches = free
      limit = { by: 'in-flight' }
    }
  }
  const intervalMs = t.maxPerSecond !== undefined ? (1000 / t.maxPerSecond) * RATE_SPACING : 0
  const firstInMs = Math.max(0, tatInMs ?? 0)
  if (t.maxPerSecond !== undefined) {
    // Requests start one interval apart from the schedule's next free time; only those due within the look-ahead.
    const fit = firstInMs > RATE_LOOKAHEAD_MS ? 0 : Math.floor((RATE_LOOKAHEAD_MS - firstInMs) / intervalMs) + 1
    if (fit < batches) {
      batches = fit
      limit = { by: 'rate', inMs: Math.max(1, firstInMs + fit * intervalMs - RATE_LOOKAHEAD_MS) }
    }
  }
  return { batches, firstInMs, intervalMs, ...(limit ? { limit } : {}) }
}

/**
 * {@link claimBatches} for capped targets: their rows are locked, each may take only the batches its
 * caps allow now (requests in flight, and requests the rate schedules within {@link RATE_LOOKAHEAD_MS}),
 * and the rows remember what was taken, all in one transaction.
 */
export async function claimWithCaps(
  pool: pg.Pool,
  project: string,
  targets: readonly TargetClaimConfig[],
  maxBatches: number,
  limits: ClaimLimits,
): Promise<{ result: ClaimResult; flow: Map<string, FlowOutcome> }> {
  const sorted = [...targets].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return withTransaction(pool, async client => {
    const locked = await lockFlows(
      client,
      project,
      sorted.map(t => t.name),
    )
    const live = await liveRequests(client, project, locked)
    const grants = new Map(
      sorted.map(t => {
        const row = locked.find(r => r.target === t.name)
        return [t.name, grantOf(t, live.filter(g => g.target === t.name).length, row?.tat_in_ms ?? null)] as const
      }),
    )
    const offered = sorted
      .filter(t => (grants.get(t.name)?.batches ?? 0) > 0)
      .map(t => ({ ...t, maxBatches: grants.get(t.name)?.batches ?? 0 }))
    const waiting = [...limits.waiting, ...sorted.filter(t => !offered.some(o => o.name === t.name)).map(t => t.name)]
    const result: ClaimResult =
      offered.length === 0
        ? { batches: [], unknownTarget: [], spent: [], lost: 0 }
        : await claimBatches(client, project, offered, maxBatches, { ...limits, waiting })
    const flow = await saveFlows(client, project, sorted, { grants, live, result, lockedAt: locked[0]?.locked_at ?? 'now' })
    return { result, flow }
  })
}

type LockedFlow = { target: string; tat_in_ms: number | null; locked_at: string; in_flight: Granted[] }

/** Locks the targets' flow rows, creating those that do not exist yet (FLOW_CREATE, then locks again). */
async function lockFlows(client: pg.PoolClient, project: string, targets: readonly string[]): Promise<LockedFlow[]> {
  const lock = async () => (await client.query<LockedFlow>(FLOW_LOCK.text, FLOW_LOCK.values({ project, targets }))).rows
  const locked = await lock()
  if (locked.length >= targets.length) return locked
  await client.query(FLOW_CREATE.text, FLOW_CREATE.values({ project, targets }))
  return lock()
}

/** Of the requests the rows remember as granted, those still in flight (their events still leased). */
async function liveRequests(
  client: pg.PoolClient,
  project: string,
  locked: readonly LockedFlow[],
): Promise<Array<{ target: string } & Granted>> {
  const granted = locked.flatMap(r => r.in_flight.map(g => ({ target: r.target, ...g })))
  if (granted.length === 0) return []
  const values = FLOW_IN_FLIGHT.values({
    project,
    targets: granted.map(g => g.target),
    ids: granted.map(g => g.id),
    leases: granted.map(g => g.lease),
  })
  return (await client.query<{ target: string } & Granted>(FLOW_IN_FLIGHT.text, values)).rows
}

/** Writes what each target took (its requests in flight, the rate's schedule) and says when its batches may start. */
async function saveFlows(
  client: pg.PoolClient,
  project: string,
  sorted: readonly TargetClaimConfig[],
  taken: { grants: Map<string, Grant>; live: ReadonlyArray<{ target: string } & Granted>; result: ClaimResult; lockedAt: string },
): Promise<Map<string, FlowOutcome>> {
  const { grants, live, result, lockedAt } = taken
  const flow = new Map<string, FlowOutcome>()
  const saved = sorted.map(t => {
    const g = grants.get(t.name) ?? grantOf(t, 0, null)
    const mine = result.batches.filter(b => b.target === t.name)
    // Fewer than granted: nothing more is due, so the cap did not cut it.
    flow.set(t.name, {
      startsInMs: mine.map((_, i) => g.firstInMs + i * g.intervalMs),
      ...(g.limit && mine.length >= g.batches ? { capped: g.limit } : {}),
    })
    const inFlight: Granted[] =
      t.maxInFlight === undefined
        ? []
        : [
            ...live.filter(l => l.target === t.name).map(({ id, lease }) => ({ id, lease })),
            ...mine.flatMap(b => (b.events[0] ? [{ id: b.events[0].id, lease: b.events[0].lease }] : [])),
          ]
    return { target: t.name, inFlight, n: mine.length, intervalMs: g.intervalMs }
  })
  await client.query(
    FLOW_SAVE.text,
    FLOW_SAVE.values({
      project,
      targets: saved.map(s => s.target),
      in_flight: saved.map(s => JSON.stringify(s.inFlight)),
      started: saved.map(s => s.n),
      interval_ms: saved.map(s => s.intervalMs),
      locked_at: lockedAt,
    }),
  )
  return flow
}
