import { cpus } from 'node:os'
import type { LatencyResult } from './latency.js'
import { dec, int, summary, table } from './stats.js'
import { eventsPerSecond, type RunResult } from './timed.js'

export type Scenario = { key: string; contender: string; scenario: string; kind: 'delivery' | 'enqueue' | 'latency' }

export type Report = {
  scenarios: Scenario[]
  results: ReadonlyMap<string, ReadonlyArray<RunResult | LatencyResult>>
  header: string[]
}

// The targets: Actions against graphile-worker's best mode, and statement budgets per event.
const TARGETS = { b1Ratio: 2, b50Ratio: 3, b1Statements: 3, b50Statements: 0.1 }

const isLatency = (r: RunResult | LatencyResult): r is LatencyResult => 'p50' in r

/** The whole printed report: the results table, the latency table, CPU shares, targets. */
export function report({ scenarios, results, header }: Report): string {
  const runs = (key: string) => results.get(key) ?? []
  const eps = (key: string) => summary(runs(key).map(eventsPerSecond))
  const stmts = (key: string) => {
    const v = runs(key).map(r => r.statementsPerEvent).filter((x): x is number => x !== undefined)
    return v.length ? summary(v).median : undefined
  }

  const main = table(
    ['contender', 'scenario', 'events/s median', 'min', 'max', 'duplicates', 'all delivered', 'stmts/event'],
    scenarios.map(s => {
      const e = eps(s.key)
      const rs = runs(s.key)
      return [
        s.contender, s.scenario, int(e.median), int(e.min), int(e.max),
        int(rs.reduce((a, r) => a + r.duplicates, 0)),
        rs.length && rs.every(r => r.allDelivered) ? 'yes' : 'no',
        dec(stmts(s.key), 3),
      ]
    }),
  )

  const latencyRows = scenarios.filter(s => s.kind === 'latency').map(s => {
    const rs = runs(s.key).filter(isLatency)
    return [s.contender, s.scenario, int(summary(rs.map(eventsPerSecond)).median), dec(summary(rs.map(r => r.p50)).median, 1), dec(summary(rs.map(r => r.p99)).median, 1),
      dec(summary(rs.map(r => r.p99)).max, 1), dec(summary(rs.map(r => r.maxMs)).max, 1)]
  })
  const latency = latencyRows.length
    ? table(['contender', 'scenario', 'events/s', 'p50 ms (median)', 'p99 ms (median)', 'p99 ms (worst round)', 'max ms'], latencyRows)
    : ''

  // The round with the median throughput stands for the scenario.
  const cpu = table(
    ['scenario', 'bench process', 'receiver', 'postgres', 'whole machine'],
    scenarios.map(s => {
      const rs = [...runs(s.key)].sort((a, b) => eventsPerSecond(a) - eventsPerSecond(b))
      const r = rs[Math.floor((rs.length - 1) / 2)]
      return [`${s.contender}: ${s.scenario}`, ...(r ? [r.cpu.bench, r.cpu.receiver, r.cpu.postgres, r.cpu.machine].map(v => `${v}%`) : ['-', '-', '-', '-'])]
    }),
  )

  const notes = scenarios.flatMap(s => runs(s.key).flatMap((r, i) => (r.note ? [`  ${s.key} round ${i + 1}: ${r.note}`] : [])))

  return [
    ...header, '',
    main, '',
    ...(latency ? ['Enqueue-to-delivery latency (events enqueued with their time in values.t, measured at the receiver):', latency, ''] : []),
    `CPU while measured (median round), % of one core; this machine's total is ${cpus().length * 100}%:`, cpu, '',
    ...targets(scenarios, eps, stmts),
    ...(notes.length ? ['', 'Runs that fell short:', ...notes] : []),
    '',
  ].join('\n')
}

function targets(scenarios: Scenario[], eps: (key: string) => { median: number }, stmts: (key: string) => number | undefined): string[] {
  const has = (key: string) => scenarios.some(s => s.key === key)
  const graphile = scenarios.filter(s => s.contender === 'graphile-worker')
  const best = graphile.map(s => ({ s, v: eps(s.key).median })).sort((a, b) => b.v - a.v)[0]
  const lines = ['Targets (computed from this run):']
  const line = (ok: boolean | undefined, text: string) => lines.push(`  ${ok === undefined ? 'n/a ' : ok ? 'PASS' : 'FAIL'}  ${text}`)
  for (const [key, size, ratio] of [['actions-b1', 1, TARGETS.b1Ratio], ['actions-b50', 50, TARGETS.b50Ratio]] as const) {
    if (!has(key) || !best) {
      line(undefined, `batchSize ${size}: Actions >= ${ratio}x graphile-worker's best mode (not measured in this run)`)
      continue
    }
    const r = eps(key).median / best.v
    line(r >= ratio, `batchSize ${size}: Actions ${int(eps(key).median)}/s = ${dec(r)}x graphile-worker's best (${best.s.scenario}, ${int(best.v)}/s); target >= ${ratio}x`)
    // For reading the result: the same ratio against each of graphile-worker's modes.
    for (const g of graphile) lines.push(`        (${dec(eps(key).median / eps(g.key).median)}x graphile-worker ${g.scenario})`)
    if (size === 1 && has('bare')) {
      const ceiling = eps('bare').median
      lines.push(`        (ceiling: a bare client sends ${int(ceiling)} POST/s here, so ${ratio}x graphile-worker's best would be ${dec(ratio * best.v / ceiling)}x of it)`)
    }
  }
  for (const [key, size, budget] of [['actions-b1', 1, TARGETS.b1Statements], ['actions-b50', 50, TARGETS.b50Statements]] as const) {
    const v = stmts(key)
    line(v === undefined ? undefined : v <= budget, `batchSize ${size}: ${dec(v, 3)} statements per delivered event; target <= ${budget}`)
  }
  return lines
}
