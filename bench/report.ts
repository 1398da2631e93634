import { cpus } from 'node:os'
import type { LatencyResult } from './latency.js'
import { dec, int, summary, table } from './stats.js'
import { eventsPerSecond, type RunResult } from './timed.js'

export type Scenario = {
  key: string
  contender: string
  scenario: string
  kind: 'delivery' | 'enqueue' | 'latency'
  /** A peer job queue: the best of them (median events/s of this run) is what the targets compare with. */
  peer?: boolean
  /** Scale-out rows: dispatch processes and projects drained. */
  scale?: { processes: number; projects: number }
  /** Latency rows: the offered rate. */
  rate?: number
}

export type Report = {
  scenarios: Scenario[]
  results: ReadonlyMap<string, ReadonlyArray<RunResult | LatencyResult>>
  header: string[]
}

// Issue 14's targets: against the best peer and the ceiling row, statement budgets, latency under load.
const TARGETS = { b1PeerRatio: 1.5, b1CeilingRatio: 0.5, b50PeerRatio: 3, b1Statements: 0.1, b50Statements: 0.01 }
// Issue 22's: per-entity order with distinct keys costs at most this share of `ordering: 'none'`'s events/s.
const ORDER_COST = 0.1
/** p99 enqueue-to-delivery bound (ms) by offered rate (events/s). */
const LATENCY_P99_MS = new Map([
  [500, 100],
  [2_000, 250],
])

const isLatency = (r: RunResult | LatencyResult): r is LatencyResult => 'p50' in r

/** The whole printed report: results, scale-out, latency, CPU shares, targets with PASS/FAIL. */
export function report({ scenarios, results, header }: Report): string {
  const runs = (key: string) => results.get(key) ?? []
  const eps = (key: string) => summary(runs(key).map(eventsPerSecond))
  const stmts = (key: string) => {
    const v = runs(key)
      .map(r => r.statementsPerEvent)
      .filter((x): x is number => x !== undefined)
    return v.length ? summary(v).median : undefined
  }
  // The round with the median throughput stands for the scenario in the CPU figures.
  const medianRun = (key: string) => {
    const rs = [...runs(key)].sort((a, b) => eventsPerSecond(a) - eventsPerSecond(b))
    return rs[Math.floor((rs.length - 1) / 2)]
  }
  const pgPerThousand = (r: RunResult | undefined) => (r && r.delivered > 0 ? (r.cpu.postgresMs / r.delivered) * 1000 : undefined)
  // The contender's own CPU per event (the bench process and any dispatch children), from its share of one core.
  const benchPerEvent = (key: string) => {
    const r = medianRun(key)
    return r && r.delivered > 0 ? ((r.cpu.bench / 100) * 1e6) / eventsPerSecond(r) : undefined
  }

  const main = table(
    ['contender', 'scenario', 'events/s median', 'min', 'max', 'duplicates', 'all delivered', 'stmts/event'],
    scenarios.map(s => {
      const e = eps(s.key)
      const rs = runs(s.key)
      return [
        s.contender,
        s.scenario,
        int(e.median),
        int(e.min),
        int(e.max),
        int(rs.reduce((a, r) => a + r.duplicates, 0)),
        rs.length && rs.every(r => r.allDelivered) ? 'yes' : 'no',
        dec(stmts(s.key), 3),
      ]
    }),
  )

  const scaleRows = scenarios.filter(s => s.scale)
  const single = (projects: number) => scaleRows.find(s => s.scale?.processes === 1 && s.scale.projects === projects)
  const scale = scaleRows.length
    ? table(
        [
          'processes',
          'projects',
          'events/s median',
          'vs 1 process',
          'dispatchers',
          'postgres',
          'pg CPU ms / 1,000 events',
          'whole machine',
        ],
        scaleRows.map(s => {
          const r = medianRun(s.key)
          const base = single(s.scale?.projects ?? 0)
          return [
            String(s.scale?.processes),
            String(s.scale?.projects),
            int(eps(s.key).median),
            base ? `${dec(eps(s.key).median / eps(base.key).median)}x` : '-',
            r ? `${r.cpu.bench}%` : '-',
            r ? `${r.cpu.postgres}%` : '-',
            dec(pgPerThousand(r), 0),
            r ? `${r.cpu.machine}%` : '-',
          ]
        }),
      )
    : ''

  const latencyRows = scenarios
    .filter(s => s.kind === 'latency')
    .map(s => {
      const rs = runs(s.key).filter(isLatency)
      return [
        s.contender,
        s.scenario,
        int(summary(rs.map(eventsPerSecond)).median),
        dec(summary(rs.map(r => r.p50)).median, 1),
        dec(summary(rs.map(r => r.p99)).median, 1),
        dec(summary(rs.map(r => r.p99)).max, 1),
        dec(summary(rs.map(r => r.maxMs)).max, 1),
      ]
    })
  const latency = latencyRows.length
    ? table(['contender', 'scenario', 'events/s', 'p50 ms (median)', 'p99 ms (median)', 'p99 ms (worst round)', 'max ms'], latencyRows)
    : ''

  // Only the latency rows run a producer (their load, SQS emulator and event source poller, bench/producer.ts).
  const cpu = table(
    [
      'scenario',
      'bench + dispatchers',
      'receiver',
      'producer',
      'postgres',
      'bench µs / event',
      'pg CPU ms / 1,000 events',
      'whole machine',
    ],
    scenarios.map(s => {
      const r = medianRun(s.key)
      const pct = (v: number | undefined) => (r && v !== undefined ? `${v}%` : '-')
      return [
        `${s.contender}: ${s.scenario}`,
        pct(r?.cpu.bench),
        pct(r?.cpu.receiver),
        pct(s.kind === 'latency' ? r?.cpu.producer : undefined),
        pct(r?.cpu.postgres),
        dec(benchPerEvent(s.key), 0),
        dec(pgPerThousand(r), 0),
        pct(r?.cpu.machine),
      ]
    }),
  )

  const notes = scenarios.flatMap(s => runs(s.key).flatMap((r, i) => (r.note ? [`  ${s.key} round ${i + 1}: ${r.note}`] : [])))
  const latencyP99 = (key: string) =>
    summary(
      runs(key)
        .filter(isLatency)
        .map(r => r.p99),
    ).median

  return [
    ...header,
    '',
    main,
    '',
    ...(scale
      ? [
          `Scale-out: dispatch processes (bench/dispatcher.ts), each draining every project, on one Postgres (median round; % of one core):`,
          scale,
          '',
        ]
      : []),
    ...(latency
      ? ['Enqueue-to-delivery latency (events enqueued with their time in values.t, measured at the receiver):', latency, '']
      : []),
    `CPU while measured (median round), % of one core; this machine's total is ${cpus().length * 100}%:`,
    cpu,
    '',
    ...targets(scenarios, eps, stmts, latencyP99),
    ...perCpu(scenarios, eps, benchPerEvent, key => pgPerThousand(medianRun(key))),
    ...(notes.length ? ['', 'Runs that fell short:', ...notes] : []),
    '',
  ].join('\n')
}

/**
 * The batchSize 1 comparisons per CPU spent instead of per second (informational, no PASS/FAIL): on a
 * box where the contender, the receiver and Postgres share a few cores, events/s also measures how they
 * preempt each other, which a deployed dispatcher (cores of its own) does not pay. Here each side's
 * cost is its own CPU per event: the contender's process, and Postgres for its statements.
 */
function perCpu(
  scenarios: Scenario[],
  eps: (key: string) => { median: number },
  benchUs: (key: string) => number | undefined,
  pgUs: (key: string) => number | undefined,
): string[] {
  const has = (key: string) => scenarios.some(s => s.key === key)
  const best = scenarios
    .filter(s => s.peer)
    .map(s => ({ s, v: eps(s.key).median }))
    .filter(p => Number.isFinite(p.v))
    .sort((a, b) => b.v - a.v)[0]
  const ours = benchUs('actions-b1')
  const ourPg = pgUs('actions-b1')
  if (!has('actions-b1') || ours === undefined || ourPg === undefined) return []
  const lines = ['', 'Per CPU spent (informational, not a target; % of one core over events/s, median round):']
  lines.push(`  batchSize 1: ${dec(ours, 0)} µs of dispatcher CPU and ${dec(ourPg, 0)} µs of Postgres CPU per event`)
  const ceiling = has('bare') ? benchUs('bare') : undefined
  if (ceiling !== undefined) {
    lines.push(
      `  ceiling client: ${dec(ceiling, 0)} µs per POST; per dispatcher CPU-second batchSize 1 delivers ${dec(ceiling / ours)}x the ceiling's POSTs (the events/s target asks ${TARGETS.b1CeilingRatio}x)`,
    )
  }
  const peerUs = best ? benchUs(best.s.key) : undefined
  const peerPg = best ? pgUs(best.s.key) : undefined
  if (best && peerUs !== undefined && peerPg !== undefined) {
    lines.push(
      `  best peer (${best.s.contender} ${best.s.scenario}): ${dec(peerUs, 0)} µs of its own and ${dec(peerPg, 0)} µs of Postgres CPU per event; ` +
        `together ${dec((peerUs + peerPg) / (ours + ourPg))}x what batchSize 1 spends (the events/s target asks ${TARGETS.b1PeerRatio}x)`,
    )
  }
  return lines
}

function targets(
  scenarios: Scenario[],
  eps: (key: string) => { median: number },
  stmts: (key: string) => number | undefined,
  p99: (key: string) => number,
): string[] {
  const has = (key: string) => scenarios.some(s => s.key === key)
  const peers = scenarios
    .filter(s => s.peer)
    .map(s => ({ s, v: eps(s.key).median }))
    .filter(p => Number.isFinite(p.v))
    .sort((a, b) => b.v - a.v)
  const best = peers[0]
  const lines = ['Targets (computed from this run):']
  const line = (ok: boolean | undefined, text: string) => lines.push(`  ${ok === undefined ? 'n/a ' : ok ? 'PASS' : 'FAIL'}  ${text}`)
  // A miss says by how much: the factor still missing.
  const short = (ok: boolean, need: number) => (ok ? '' : `; short by ${dec(need)}x`)
  const bestName = best ? `${best.s.contender} ${best.s.scenario}, ${int(best.v)}/s` : ''

  for (const [key, size, ratio] of [
    ['actions-b1', 1, TARGETS.b1PeerRatio],
    ['actions-b50', 50, TARGETS.b50PeerRatio],
  ] as const) {
    if (!has(key) || !best) {
      line(undefined, `batchSize ${size}: Actions >= ${ratio}x the best peer (not measured in this run)`)
      continue
    }
    const v = eps(key).median
    const r = v / best.v
    line(
      r >= ratio,
      `batchSize ${size}: Actions ${int(v)}/s = ${dec(r)}x the best peer (${bestName}); target >= ${ratio}x${short(r >= ratio, ratio / r)}`,
    )
    for (const p of peers) lines.push(`        (${dec(v / p.v)}x ${p.s.contender} ${p.s.scenario})`)
  }
  if (has('actions-b1') && has('bare')) {
    const ceiling = eps('bare').median
    const r = eps('actions-b1').median / ceiling
    line(
      r >= TARGETS.b1CeilingRatio,
      `batchSize 1: Actions = ${dec(r)}x the ceiling row (${int(ceiling)} POST/s); target >= ${TARGETS.b1CeilingRatio}x${short(r >= TARGETS.b1CeilingRatio, TARGETS.b1CeilingRatio / r)}`,
    )
    if (best) lines.push(`        (${TARGETS.b1PeerRatio}x the best peer is ${dec((TARGETS.b1PeerRatio * best.v) / ceiling)}x the ceiling)`)
  } else {
    line(undefined, `batchSize 1: Actions >= ${TARGETS.b1CeilingRatio}x the ceiling row (not measured in this run)`)
  }
  for (const [key, size, budget] of [
    ['actions-b1', 1, TARGETS.b1Statements],
    ['actions-b50', 50, TARGETS.b50Statements],
  ] as const) {
    const v = stmts(key)
    line(v === undefined ? undefined : v <= budget, `batchSize ${size}: ${dec(v, 3)} statements per delivered event; target <= ${budget}`)
  }
  for (const size of [1, 50]) {
    const [ordered, none] = [`actions-b${size}`, `actions-b${size}-none`]
    if (!has(ordered) || !has(none)) {
      line(undefined, `batchSize ${size}: ordering entity >= ${dec(1 - ORDER_COST)}x ordering none (not measured in this run)`)
      continue
    }
    const r = eps(ordered).median / eps(none).median
    line(
      r >= 1 - ORDER_COST,
      `batchSize ${size}: ordering entity (distinct keys) ${int(eps(ordered).median)}/s = ${dec(r)}x ordering none (${int(eps(none).median)}/s); target >= ${dec(1 - ORDER_COST)}x`,
    )
  }
  for (const [rate, bound] of LATENCY_P99_MS) {
    const s = scenarios.find(x => x.kind === 'latency' && x.rate === rate)
    const v = s ? p99(s.key) : NaN
    if (!s || !Number.isFinite(v)) {
      line(undefined, `p99 enqueue-to-delivery < ${bound} ms at ${int(rate)}/s offered (not measured in this run)`)
      continue
    }
    line(
      v < bound,
      `p99 enqueue-to-delivery at ${int(rate)}/s offered: ${dec(v, 1)} ms (median of rounds); target < ${bound} ms${v < bound ? '' : `; over by ${dec(v - bound, 1)} ms`}`,
    )
  }
  return lines
}
