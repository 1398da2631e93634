import { cpus } from 'node:os'
import type { LatencyResult } from './latency.js'
import { dec, int, summary, table } from './stats.js'
import { evaluateTargets, targetLines, type RowFigures } from './targets.js'
import { eventsPerSecond, type RunResult } from './timed.js'
import { TRACED_SAMPLER } from './traced.js'

export type Scenario = {
  key: string
  contender: string
  scenario: string
  kind: 'delivery' | 'enqueue' | 'latency'
  /** A peer job queue: the best of them on each measure of this run is what the targets compare with. */
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
  /** Printed again right above the targets (a Node that is not the deployment's), so no one misses them. */
  warnings?: string[]
  /** Lines measured outside the rows (the dispatch handler's empty invocation), printed with the informational ones. */
  informational?: string[]
}

/** Informational (no PASS/FAIL): the ceiling ratio and the cost of per-entity order, each against the ratio it aims at. */
const CEILING_RATIO = 0.5
const ORDER_COST = 0.1

const isLatency = (r: RunResult | LatencyResult): r is LatencyResult => 'p50' in r
/** A difference with its sign, one decimal. */
const signed = (v: number) => `${v < 0 ? '-' : '+'}${dec(Math.abs(v), 1)}`

/** The figures of a run's results by row key: the summaries every table of the report reads. */
function measuresOf(results: Report['results']) {
  const runs = (key: string) => results.get(key) ?? []
  // The round with the median throughput stands for the scenario in the CPU figures.
  const medianRun = (key: string) => {
    const rs = [...runs(key)].sort((a, b) => eventsPerSecond(a) - eventsPerSecond(b))
    return rs[Math.floor((rs.length - 1) / 2)]
  }
  return {
    runs,
    medianRun,
    eps: (key: string) => summary(runs(key).map(eventsPerSecond)),
    stmts: (key: string) => {
      const v = runs(key)
        .map(r => r.statementsPerEvent)
        .filter((x): x is number => x !== undefined)
      return v.length ? summary(v).median : undefined
    },
    // The traced row: spans the collector took per event, median over the rounds.
    spans: (key: string) => {
      const v = runs(key).flatMap(r => (r.spans !== undefined && r.events > 0 ? [r.spans / r.events] : []))
      return v.length ? summary(v).median : undefined
    },
    pgPerThousand: (r: RunResult | undefined) => (r && r.delivered > 0 ? (r.cpu.postgresMs / r.delivered) * 1000 : undefined),
    // The contender's own CPU per event (the bench process and any dispatch children), µs.
    benchPerEvent: (key: string) => {
      const r = medianRun(key)
      return r && r.delivered > 0 ? (r.cpu.benchMs / r.delivered) * 1000 : undefined
    },
  }
}
type Measures = ReturnType<typeof measuresOf>

/** The whole printed report: results, scale-out, latency, CPU shares, targets with PASS/FAIL. */
export function report({ scenarios, results, header, warnings = [], informational: extra = [] }: Report): string {
  const m = measuresOf(results)
  const scale = scaleTable(scenarios, m)
  const latency = latencyTable(scenarios, m)
  const notes = scenarios.flatMap(s => m.runs(s.key).flatMap((r, i) => (r.note ? [`  ${s.key} round ${i + 1}: ${r.note}`] : [])))
  const figures = figuresOf(scenarios, m)
  const peers = scenarios.filter(s => s.peer).flatMap(s => figures.get(s.key) ?? [])
  const hot = updatesTable(scenarios, m.runs)
  const scaleTitle = `Scale-out: dispatch processes (bench/dispatcher.ts), each draining every project, on one Postgres (median round; % of one core):`
  const latencyTitle = 'Enqueue-to-delivery latency (events enqueued with their time in values.t, measured at the receiver):'
  return [
    ...header,
    '',
    mainTable(scenarios, m),
    '',
    ...(scale ? [scaleTitle, scale, ''] : []),
    ...(latency ? [latencyTitle, latency, ''] : []),
    `CPU while measured (median round), % of one core; this machine's total is ${cpus().length * 100}%:`,
    cpuTable(scenarios, m),
    '',
    ...(hot ? ['Row updates in the bench database while measured (pg_stat_user_tables, all measured rounds together):', hot, ''] : []),
    ...warnings,
    ...targetLines(evaluateTargets(figures, peers)),
    ...informational(figures, peers, extra),
    ...(notes.length ? ['', 'Runs that fell short:', ...notes] : []),
    '',
  ].join('\n')
}

/** Every row's throughput, duplicates, completeness and statements per event. */
function mainTable(scenarios: readonly Scenario[], m: Measures): string {
  return table(
    ['contender', 'scenario', 'events/s median', 'min', 'max', 'duplicates', 'all delivered', 'stmts/event'],
    scenarios.map(s => {
      const e = m.eps(s.key)
      const rs = m.runs(s.key)
      return [
        s.contender,
        s.scenario,
        int(e.median),
        int(e.min),
        int(e.max),
        int(rs.reduce((a, r) => a + r.duplicates, 0)),
        rs.length && rs.every(r => r.allDelivered) ? 'yes' : 'no',
        dec(m.stmts(s.key), 3),
      ]
    }),
  )
}

/** The scale-out grid against one process of the same projects; empty without scale-out rows. */
function scaleTable(scenarios: readonly Scenario[], m: Measures): string {
  const scaleRows = scenarios.filter(s => s.scale)
  if (!scaleRows.length) return ''
  const single = (projects: number) => scaleRows.find(s => s.scale?.processes === 1 && s.scale.projects === projects)
  const columns = [
    'processes',
    'projects',
    'events/s median',
    'vs 1 process',
    'dispatchers',
    'postgres',
    'pg CPU ms / 1,000 events',
    'whole machine',
  ]
  return table(
    columns,
    scaleRows.map(s => {
      const r = m.medianRun(s.key)
      const base = single(s.scale?.projects ?? 0)
      return [
        String(s.scale?.processes),
        String(s.scale?.projects),
        int(m.eps(s.key).median),
        base ? `${dec(m.eps(s.key).median / m.eps(base.key).median)}x` : '-',
        r ? `${r.cpu.bench}%` : '-',
        r ? `${r.cpu.postgres}%` : '-',
        dec(m.pgPerThousand(r), 0),
        r ? `${r.cpu.machine}%` : '-',
      ]
    }),
  )
}

/** The latency rows' percentiles; empty without latency rows. */
function latencyTable(scenarios: readonly Scenario[], m: Measures): string {
  const rows = scenarios
    .filter(s => s.kind === 'latency')
    .map(s => {
      const rs = m.runs(s.key).filter(isLatency)
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
  return rows.length
    ? table(['contender', 'scenario', 'events/s', 'p50 ms (median)', 'p99 ms (median)', 'p99 ms (worst round)', 'max ms'], rows)
    : ''
}

/** Each process's CPU share in the median round, and CPU per event. */
function cpuTable(scenarios: readonly Scenario[], m: Measures): string {
  // Only the latency rows run a producer (their load, SQS emulator and event source poller, bench/producer.ts).
  const columns = [
    'scenario',
    'bench + dispatchers',
    'receiver',
    'producer',
    'postgres',
    'bench µs / event',
    'pg CPU ms / 1,000 events',
    'whole machine',
  ]
  return table(
    columns,
    scenarios.map(s => {
      const r = m.medianRun(s.key)
      const pct = (v: number | undefined) => (r && v !== undefined ? `${v}%` : '-')
      return [
        `${s.contender}: ${s.scenario}`,
        pct(r?.cpu.bench),
        pct(r?.cpu.receiver),
        pct(s.kind === 'latency' ? r?.cpu.producer : undefined),
        pct(r?.cpu.postgres),
        dec(m.benchPerEvent(s.key), 0),
        dec(m.pgPerThousand(r), 0),
        pct(r?.cpu.machine),
      ]
    }),
  )
}

/** What the targets judge, per row: throughput, CPU per event (delivery rows), statements, spans, p99. */
function figuresOf(scenarios: readonly Scenario[], m: Measures): Map<string, RowFigures> {
  return new Map<string, RowFigures>(
    scenarios.map(s => {
      const p99s = m
        .runs(s.key)
        .filter(isLatency)
        .map(r => r.p99)
      const ownUs = m.benchPerEvent(s.key)
      const pgUs = m.pgPerThousand(m.medianRun(s.key))
      const stmt = m.stmts(s.key)
      const spans = m.spans(s.key)
      return [
        s.key,
        {
          key: s.key,
          name: `${s.contender} ${s.scenario}`,
          eventsPerSecond: m.eps(s.key).median,
          ...(s.kind === 'delivery' && ownUs !== undefined ? { ownUs } : {}),
          ...(s.kind === 'delivery' && pgUs !== undefined ? { pgUs } : {}),
          ...(stmt !== undefined ? { statementsPerEvent: stmt } : {}),
          ...(spans !== undefined ? { spansPerEvent: spans } : {}),
          ...(p99s.length ? { p99Ms: summary(p99s).median } : {}),
        },
      ]
    }),
  )
}

/** Per row with counted updates: what the measured rounds did to actions_event (and every other table). */
function updatesTable(scenarios: readonly Scenario[], runs: (key: string) => ReadonlyArray<RunResult | LatencyResult>): string {
  const rows = scenarios.flatMap(s => {
    const rs = runs(s.key).filter(r => r.updates)
    if (!rs.length) return []
    const sum = (f: (r: RunResult) => number) => rs.reduce((a, r) => a + f(r), 0)
    const delivered = sum(r => r.delivered)
    const updates = sum(r => r.updates?.updates ?? 0)
    const hot = sum(r => r.updates?.hot ?? 0)
    const others = sum(r => (r.updates?.allTables ?? 0) - (r.updates?.updates ?? 0))
    const perEvent = (v: number) => (delivered > 0 ? dec(v / delivered) : '-')
    return [
      [
        `${s.contender}: ${s.scenario}`,
        int(updates),
        int(hot),
        updates > 0 ? `${dec((hot / updates) * 100, 1)}%` : '-',
        perEvent(updates),
        perEvent(updates - hot),
        perEvent(others),
      ],
    ]
  })
  return rows.length
    ? table(
        [
          'scenario',
          'actions_event updates',
          'HOT updates',
          'HOT ratio',
          'updates / event',
          'non-HOT / event',
          'other tables: updates / event',
        ],
        rows,
      )
    : ''
}

/**
 * What is printed below the targets without PASS/FAIL: the ceiling and per-entity-order ratios of
 * earlier issues, what the dispatch handler's edge adds to drainProject per event, and what tracing
 * (the traced row) adds to it.
 */
function informational(rows: ReadonlyMap<string, RowFigures>, peers: readonly RowFigures[], extra: readonly string[]): string[] {
  const lines = ['', 'Informational (not targets):']
  const b1 = rows.get('actions-b1')
  const bare = rows.get('bare')
  if (b1 && bare) {
    const r = b1.eventsPerSecond / bare.eventsPerSecond
    lines.push(`  batchSize 1 = ${dec(r)}x the ceiling row's events/s (${int(bare.eventsPerSecond)} POST/s; aim ${CEILING_RATIO}x)`)
    if (b1.ownUs !== undefined && bare.ownUs !== undefined) {
      lines.push(
        `  ceiling client: ${dec(bare.ownUs, 1)} µs per POST; per dispatcher CPU-second batchSize 1 delivers ${dec(bare.ownUs / b1.ownUs)}x its POSTs`,
      )
    }
  }
  for (const size of [1, 50]) {
    const ordered = rows.get(`actions-b${size}`)
    const none = rows.get(`actions-b${size}-none`)
    if (ordered && none) {
      lines.push(
        `  batchSize ${size}: ordering entity ${int(ordered.eventsPerSecond)}/s = ${dec(ordered.eventsPerSecond / none.eventsPerSecond)}x ordering none ` +
          `(${int(none.eventsPerSecond)}/s; aim >= ${dec(1 - ORDER_COST)}x)`,
      )
    }
  }
  const handler = rows.get('actions-b1-handler')
  if (b1 && handler && b1.ownUs !== undefined && handler.ownUs !== undefined && b1.pgUs !== undefined && handler.pgUs !== undefined) {
    lines.push(
      `  the dispatch handler's edge at batchSize 1: ${dec(handler.ownUs, 1)} + ${dec(handler.pgUs, 1)} µs (dispatcher + Postgres) per event ` +
        `against drainProject's ${dec(b1.ownUs, 1)} + ${dec(b1.pgUs, 1)}: ${dec(handler.ownUs - b1.ownUs, 1)} + ${dec(handler.pgUs - b1.pgUs, 1)} µs; ` +
        `${int(handler.eventsPerSecond)} against ${int(b1.eventsPerSecond)}/s`,
    )
  }
  const traced = rows.get('actions-b1-traced')
  if (b1 && traced && b1.ownUs !== undefined && traced.ownUs !== undefined && b1.pgUs !== undefined && traced.pgUs !== undefined) {
    const spans = traced.spansPerEvent === undefined ? '' : `, ${dec(traced.spansPerEvent)} spans exported per event`
    lines.push(
      `  tracing on (${TRACED_SAMPLER}, OTLP/HTTP to a collector process): ${signed(traced.ownUs - b1.ownUs)} µs dispatcher, ` +
        `${signed(traced.pgUs - b1.pgUs)} µs Postgres per event at batchSize 1 (${dec(traced.ownUs, 1)} + ${dec(traced.pgUs, 1)} ` +
        `against ${dec(b1.ownUs, 1)} + ${dec(b1.pgUs, 1)}${spans}); ${int(traced.eventsPerSecond)} against ${int(b1.eventsPerSecond)}/s`,
    )
  }
  lines.push(...extra)
  if (peers.length === 0) lines.push('  no peer row ran: the targets against the best peer are not measured')
  return lines.length > 2 ? lines : []
}
