import { dec, int } from './stats.js'

/** What the targets read of one row of a run. */
export type RowFigures = {
  key: string
  /** How a target line names the row: contender and scenario. */
  name: string
  /** Median of rounds. */
  eventsPerSecond: number
  /** The contender's own CPU per delivered event, µs (its process; the median round by events/s). */
  ownUs?: number
  /** Postgres CPU per delivered event, µs (the same round). */
  pgUs?: number
  /** Median of rounds. */
  statementsPerEvent?: number
  /** The traced row: spans its collector took per event, median of rounds. */
  spansPerEvent?: number
  /** Latency rows: p99 enqueue-to-delivery, ms, median of rounds. */
  p99Ms?: number
}

/**
 * The bench's targets (bench/README.md, "Targets"). "The best peer" is the best peer row of the same run on the measure
 * compared: the cheapest in CPU per event (dispatcher + Postgres), the fastest in events/s. Statements and p99
 * latencies are held to what the full run before it measured.
 */
export const TARGETS = {
  /** batchSize 1: dispatcher + Postgres CPU per delivered event at most this share of the best peer's. */
  b1CpuRatio: 1,
  /** batchSize 1: events/s at least this multiple of the best peer's. */
  b1PeerRatio: 1,
  /** batchSize 50: events/s at least this multiple of the best peer's. */
  b50PeerRatio: 2.5,
  /** batchSize 50: Postgres CPU per delivered event at most this share of the cheapest peer's Postgres. */
  b50PgRatio: 0.5,
  /** `actions-b1-capped`: Postgres CPU per event at most this multiple of `actions-b1`'s. */
  cappedPgRatio: 4,
  b1Statements: 0.013,
  b50Statements: 0.004,
  /** p99 enqueue-to-delivery bound (ms, inclusive) by offered rate (events/s). */
  latencyP99Ms: [
    [500, 21.4],
    [2_000, 27.4],
    [5_000, 156.1],
  ] as ReadonlyArray<readonly [number, number]>,
}

/** Every target holds for both orderings; a row's key carries the ordering as a suffix. */
export const ORDERINGS = [
  { ordering: 'entity', suffix: '', label: 'ordering entity (distinct keys)' },
  { ordering: 'none', suffix: '-none', label: 'ordering none' },
] as const

/** The delivery and latency rows' keys for one ordering. */
export const targetKeys = (suffix: string) => ({
  b1: `actions-b1${suffix}`,
  b50: `actions-b50${suffix}`,
  latency: (rate: number) => `latency-${rate}${suffix}`,
})

/**
 * One target's outcome: PASS (true), FAIL (false) or not measured (undefined), and what to print.
 * `id` names the target and ordering, e.g. `b1-cpu/entity`, `p99-5000/none`.
 */
export type Verdict = { id: string; ok: boolean | undefined; text: string; details: string[] }

const cpuOf = (r: RowFigures) => (r.ownUs !== undefined && r.pgUs !== undefined ? r.ownUs + r.pgUs : undefined)

/** The peers that measured `value`, best first (`better` orders two values). */
function ranked(peers: readonly RowFigures[], value: (r: RowFigures) => number | undefined, better: (a: number, b: number) => number) {
  return peers
    .map(p => ({ p, v: value(p) }))
    .filter((x): x is { p: RowFigures; v: number } => x.v !== undefined && Number.isFinite(x.v) && x.v > 0)
    .sort((a, b) => better(a.v, b.v))
}

/**
 * The bench's targets over one run's figures, for each ordering: `rows` by key, `peers` the peer rows.
 * A pure function, so that its edges are tested (test/bench/targets.test.ts). A miss says by how much.
 */
export function evaluateTargets(rows: ReadonlyMap<string, RowFigures>, peers: readonly RowFigures[]): Verdict[] {
  const byCpu = ranked(peers, cpuOf, (a, b) => a - b)
  const bySpeed = ranked(
    peers,
    p => p.eventsPerSecond,
    (a, b) => b - a,
  )
  return ORDERINGS.flatMap(({ ordering, suffix, label }) => {
    const keys = targetKeys(suffix)
    const o: OrderingRun = { label, rows, keys, b1: rows.get(keys.b1), b50: rows.get(keys.b50), byCpu, bySpeed }
    const capped = ordering === 'entity' ? [cappedVerdict(o)] : []
    const verdicts = [cpuVerdict(o), ...speedVerdicts(o), pgVerdict(o), ...capped, ...statementVerdicts(o), ...latencyVerdicts(o)]
    return verdicts.map(({ id, ...v }) => ({ id: `${id}/${ordering}`, ...v }))
  })
}

/** One ordering's rows and the ranked peers, as each target reads them. */
type OrderingRun = {
  label: string
  rows: ReadonlyMap<string, RowFigures>
  keys: ReturnType<typeof targetKeys>
  b1: RowFigures | undefined
  b50: RowFigures | undefined
  byCpu: ReturnType<typeof ranked>
  bySpeed: ReturnType<typeof ranked>
}

/** A target the run did not measure (its row was not selected). */
const missing = (id: string, text: string): Verdict => ({ id, ok: undefined, text: `${text} (not measured in this run)`, details: [] })

/** batchSize 1: dispatcher + Postgres CPU per event against the cheapest peer's. */
function cpuVerdict({ label, b1, byCpu }: OrderingRun): Verdict {
  const cpuTarget = `batchSize 1, ${label}: dispatcher + Postgres CPU per event <= ${TARGETS.b1CpuRatio}x the best peer's`
  const ours = b1 && cpuOf(b1)
  const cheapest = byCpu[0]
  if (!b1 || ours === undefined || !cheapest) return missing('b1-cpu', cpuTarget)
  const r = ours / cheapest.v
  const ok = r <= TARGETS.b1CpuRatio
  return {
    id: 'b1-cpu',
    ok,
    text:
      `batchSize 1, ${label}: ${dec(ours, 1)} µs per event (${dec(b1.ownUs, 1)} dispatcher + ${dec(b1.pgUs, 1)} Postgres) = ${dec(r)}x ` +
      `the best peer's (${cheapest.p.name}: ${dec(cheapest.v, 1)} µs); target <= ${TARGETS.b1CpuRatio}x` +
      (ok ? '' : `; over by ${dec(r / TARGETS.b1CpuRatio)}x (${dec(ours - TARGETS.b1CpuRatio * cheapest.v, 1)} µs too many)`),
    details: byCpu.map(x => `(${dec(ours / x.v)}x ${x.p.name}: ${dec(x.p.ownUs, 1)} + ${dec(x.p.pgUs, 1)} µs)`),
  }
}

/** Events per second at batchSize 1 and 50 against the fastest peer's. */
function speedVerdicts({ label, b1, b50, bySpeed }: OrderingRun): Verdict[] {
  const rows = [
    [b1, 1, TARGETS.b1PeerRatio],
    [b50, 50, TARGETS.b50PeerRatio],
  ] as const
  return rows.map(([row, size, ratio]): Verdict => {
    const fastest = bySpeed[0]
    const text = `batchSize ${size}, ${label}: events/s >= ${ratio}x the best peer's`
    if (!row || !fastest || !Number.isFinite(row.eventsPerSecond)) return missing(`b${size}-eps`, text)
    const r = row.eventsPerSecond / fastest.v
    const ok = r >= ratio
    return {
      id: `b${size}-eps`,
      ok,
      text:
        `batchSize ${size}, ${label}: ${int(row.eventsPerSecond)}/s = ${dec(r)}x the best peer's (${fastest.p.name}, ${int(fastest.v)}/s); ` +
        `target >= ${ratio}x${ok ? '' : `; short by ${dec(ratio / r)}x`}`,
      details: bySpeed.map(x => `(${dec(row.eventsPerSecond / x.v)}x ${x.p.name})`),
    }
  })
}

/** batchSize 50: Postgres CPU per delivered event against the cheapest peer's Postgres. */
function pgVerdict({ label, b50, byCpu }: OrderingRun): Verdict {
  const pgText = `batchSize 50, ${label}: Postgres CPU per event <= ${TARGETS.b50PgRatio}x the best peer's`
  const cheapest = byCpu[0]
  if (!b50 || b50.pgUs === undefined || !cheapest || cheapest.p.pgUs === undefined || cheapest.p.pgUs <= 0) return missing('b50-pg', pgText)
  const r = b50.pgUs / cheapest.p.pgUs
  const ok = r <= TARGETS.b50PgRatio
  return {
    id: 'b50-pg',
    ok,
    text:
      `batchSize 50, ${label}: Postgres CPU ${dec(b50.pgUs, 1)} µs per event = ${dec(r)}x the best peer's ` +
      `(${cheapest.p.name}: ${dec(cheapest.p.pgUs, 1)} µs); target <= ${TARGETS.b50PgRatio}x` +
      (ok ? '' : `; over by ${dec(r / TARGETS.b50PgRatio)}x`),
    details: [],
  }
}

/** `actions-b1-capped`: Postgres CPU per event against `actions-b1`'s (the capped row runs with entity order). */
function cappedVerdict({ rows, b1 }: OrderingRun): Verdict {
  const capped = rows.get('actions-b1-capped')
  const cappedText = `actions-b1-capped: Postgres CPU per event <= ${TARGETS.cappedPgRatio}x actions-b1's`
  if (!capped || capped.pgUs === undefined || !b1 || b1.pgUs === undefined || b1.pgUs <= 0) return missing('capped-pg', cappedText)
  const r = capped.pgUs / b1.pgUs
  const ok = r <= TARGETS.cappedPgRatio
  return {
    id: 'capped-pg',
    ok,
    text:
      `actions-b1-capped: Postgres CPU ${dec(capped.pgUs, 1)} µs per event = ${dec(r)}x actions-b1's (${dec(b1.pgUs, 1)} µs); ` +
      `target <= ${TARGETS.cappedPgRatio}x${ok ? '' : `; over by ${dec(r / TARGETS.cappedPgRatio)}x`}`,
    details: [],
  }
}

/** Statements per delivered event at batchSize 1 and 50. */
function statementVerdicts({ label, b1, b50 }: OrderingRun): Verdict[] {
  const rows = [
    [b1, 1, TARGETS.b1Statements],
    [b50, 50, TARGETS.b50Statements],
  ] as const
  return rows.map(([row, size, budget]): Verdict => {
    const v = row?.statementsPerEvent
    const text = `batchSize ${size}, ${label}: statements per delivered event <= ${budget}`
    if (v === undefined) return missing(`b${size}-stmts`, text)
    return {
      id: `b${size}-stmts`,
      ok: v <= budget,
      text: `batchSize ${size}, ${label}: ${dec(v, 3)} statements per delivered event; target <= ${budget}`,
      details: [],
    }
  })
}

/** p99 enqueue-to-delivery at each offered rate. */
function latencyVerdicts({ label, rows, keys }: OrderingRun): Verdict[] {
  return TARGETS.latencyP99Ms.map(([rate, bound]): Verdict => {
    const v = rows.get(keys.latency(rate))?.p99Ms
    const text = `p99 enqueue-to-delivery at ${int(rate)}/s offered, ${label}: <= ${bound} ms`
    if (v === undefined || !Number.isFinite(v)) return missing(`p99-${rate}`, text)
    const ok = v <= bound
    return {
      id: `p99-${rate}`,
      ok,
      text: `p99 enqueue-to-delivery at ${int(rate)}/s offered, ${label}: ${dec(v, 1)} ms (median of rounds); target <= ${bound} ms${ok ? '' : `; over by ${dec(v - bound, 1)} ms`}`,
      details: [],
    }
  })
}

/** The verdicts as the report prints them, with a count of each outcome. */
export function targetLines(verdicts: readonly Verdict[]): string[] {
  const count = (ok: boolean | undefined) => verdicts.filter(v => v.ok === ok).length
  return [
    `Targets (computed from this run): ${count(true)} PASS, ${count(false)} FAIL, ${count(undefined)} not measured`,
    ...verdicts.flatMap(v => [
      `  ${v.ok === undefined ? 'n/a ' : v.ok ? 'PASS' : 'FAIL'}  ${v.text}`,
      ...v.details.map(d => `        ${d}`),
    ]),
  ]
}
