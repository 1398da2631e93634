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
 * The bench's targets (bench/README.md, "Targets"). "The best peer" is the best peer row of the same run on the measure compared:
 * the cheapest in CPU per event, the fastest in events/s.
 */
export const TARGETS = {
  /** batchSize 1: dispatcher + Postgres CPU per delivered event at most this share of the best peer's. */
  b1CpuRatio: 0.67,
  /** batchSize 1: events/s at least this multiple of the best peer's. */
  b1PeerRatio: 1.2,
  /** batchSize 50: events/s at least this multiple of the best peer's. */
  b50PeerRatio: 3,
  /** batchSize 50: Postgres CPU ms per 1,000 delivered events at most this (half of the 23 measured before the claim's redesign). */
  b50PgMsPer1000: 12,
  b1Statements: 0.1,
  b50Statements: 0.01,
  /** p99 enqueue-to-delivery bound (ms, exclusive) by offered rate (events/s). */
  latencyP99Ms: [
    [500, 100],
    [2_000, 100],
    [5_000, 250],
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
  const out: Verdict[] = []
  const byCpu = ranked(peers, cpuOf, (a, b) => a - b)
  const bySpeed = ranked(
    peers,
    p => p.eventsPerSecond,
    (a, b) => b - a,
  )
  for (const { ordering, suffix, label } of ORDERINGS) {
    const missing = (id: string, text: string) =>
      out.push({ id: `${id}/${ordering}`, ok: undefined, text: `${text} (not measured in this run)`, details: [] })
    const push = (id: string, v: Omit<Verdict, 'id'>) => out.push({ id: `${id}/${ordering}`, ...v })
    const keys = targetKeys(suffix)
    const b1 = rows.get(keys.b1)
    const b50 = rows.get(keys.b50)

    const cpuTarget = `batchSize 1, ${label}: dispatcher + Postgres CPU per event <= ${TARGETS.b1CpuRatio}x the best peer's`
    const ours = b1 && cpuOf(b1)
    const cheapest = byCpu[0]
    if (!b1 || ours === undefined || !cheapest) missing('b1-cpu', cpuTarget)
    else {
      const r = ours / cheapest.v
      const ok = r <= TARGETS.b1CpuRatio
      push('b1-cpu', {
        ok,
        text:
          `batchSize 1, ${label}: ${dec(ours, 1)} µs per event (${dec(b1.ownUs, 1)} dispatcher + ${dec(b1.pgUs, 1)} Postgres) = ${dec(r)}x ` +
          `the best peer's (${cheapest.p.name}: ${dec(cheapest.v, 1)} µs); target <= ${TARGETS.b1CpuRatio}x` +
          (ok ? '' : `; over by ${dec(r / TARGETS.b1CpuRatio)}x (${dec(ours - TARGETS.b1CpuRatio * cheapest.v, 1)} µs too many)`),
        details: byCpu.map(x => `(${dec(ours / x.v)}x ${x.p.name}: ${dec(x.p.ownUs, 1)} + ${dec(x.p.pgUs, 1)} µs)`),
      })
    }

    for (const [row, size, ratio] of [
      [b1, 1, TARGETS.b1PeerRatio],
      [b50, 50, TARGETS.b50PeerRatio],
    ] as const) {
      const fastest = bySpeed[0]
      const text = `batchSize ${size}, ${label}: events/s >= ${ratio}x the best peer's`
      if (!row || !fastest || !Number.isFinite(row.eventsPerSecond)) {
        missing(`b${size}-eps`, text)
        continue
      }
      const r = row.eventsPerSecond / fastest.v
      const ok = r >= ratio
      push(`b${size}-eps`, {
        ok,
        text:
          `batchSize ${size}, ${label}: ${int(row.eventsPerSecond)}/s = ${dec(r)}x the best peer's (${fastest.p.name}, ${int(fastest.v)}/s); ` +
          `target >= ${ratio}x${ok ? '' : `; short by ${dec(ratio / r)}x`}`,
        details: bySpeed.map(x => `(${dec(row.eventsPerSecond / x.v)}x ${x.p.name})`),
      })
    }

    const pgText = `batchSize 50, ${label}: Postgres CPU <= ${TARGETS.b50PgMsPer1000} ms per 1,000 events`
    if (!b50 || b50.pgUs === undefined) missing('b50-pg', pgText)
    else {
      const ok = b50.pgUs <= TARGETS.b50PgMsPer1000
      push('b50-pg', {
        ok,
        text:
          `batchSize 50, ${label}: Postgres CPU ${dec(b50.pgUs, 1)} ms per 1,000 events; target <= ${TARGETS.b50PgMsPer1000} ms` +
          (ok ? '' : `; over by ${dec(b50.pgUs / TARGETS.b50PgMsPer1000)}x`),
        details: [],
      })
    }

    for (const [row, size, budget] of [
      [b1, 1, TARGETS.b1Statements],
      [b50, 50, TARGETS.b50Statements],
    ] as const) {
      const v = row?.statementsPerEvent
      const text = `batchSize ${size}, ${label}: statements per delivered event <= ${budget}`
      if (v === undefined) missing(`b${size}-stmts`, text)
      else
        push(`b${size}-stmts`, {
          ok: v <= budget,
          text: `batchSize ${size}, ${label}: ${dec(v, 3)} statements per delivered event; target <= ${budget}`,
          details: [],
        })
    }

    for (const [rate, bound] of TARGETS.latencyP99Ms) {
      const v = rows.get(keys.latency(rate))?.p99Ms
      const text = `p99 enqueue-to-delivery at ${int(rate)}/s offered, ${label}: < ${bound} ms`
      if (v === undefined || !Number.isFinite(v)) missing(`p99-${rate}`, text)
      else {
        const ok = v < bound
        push(`p99-${rate}`, {
          ok,
          text: `p99 enqueue-to-delivery at ${int(rate)}/s offered, ${label}: ${dec(v, 1)} ms (median of rounds); target < ${bound} ms${ok ? '' : `; over by ${dec(v - bound, 1)} ms`}`,
          details: [],
        })
      }
    }
  }
  return out
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
