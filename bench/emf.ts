// The EMF writer: lib/metrics/emf.ts (Powertools' Metrics 2.35.0 builds the documents) against the
// hand-written writer it replaced (kept below as the contender), on what one invocation of each
// function writes. Both produce the same dimension sets; interleaved rounds (A, B, B, A, ...) so a
// warming JIT or a noisy neighbour hits both alike. Prints one table.
//
//   npx tsx bench/emf.ts [rounds=7] [iterations per round=2000]
import { performance } from 'node:perf_hooks'
import { emfDocuments, EMF_SERVICE, type Datum } from '../lib/metrics/emf.js'
import { summary, table } from './stats.js'

const NAMESPACE = 'Contember/Actions'
const ROLLUP_KEEP = new Set(['Reason'])
/** What EMF allows per metric and document; the hand-written writer used all of it. */
const EMF_MAX_VALUES = 100

const gauges = (p: number): Datum[] => [
  { name: 'HeartbeatAgeSeconds', unit: 'Seconds', dimensions: { Project: `p${p}` }, values: [0] },
  { name: 'DueEvents', unit: 'Count', dimensions: { Project: `p${p}`, State: 'created' }, values: [p] },
  { name: 'DueEvents', unit: 'Count', dimensions: { Project: `p${p}`, State: 'retrying' }, values: [1] },
  { name: 'OldestDueEventAgeSeconds', unit: 'Seconds', dimensions: { Project: `p${p}` }, values: [3] },
  { name: 'FailedEvents', unit: 'Count', dimensions: { Project: `p${p}` }, values: [0] },
]

/** What each function writes in one invocation (counter deltas, durations, sweeper gauges). */
const WORKLOADS: Array<{ name: string; data: Datum[] }> = [
  { name: 'enqueue: 1 counter', data: [{ name: 'EventsEnqueued', unit: 'Count', dimensions: { Project: 'p' }, values: [5] }] },
  {
    name: 'dispatch: 3 counters, 200 durations',
    data: [
      { name: 'EventsSucceeded', unit: 'Count', dimensions: { Project: 'p' }, values: [190] },
      { name: 'DeliveryAttemptsFailed', unit: 'Count', dimensions: { Project: 'p' }, values: [10] },
      { name: 'EventsFailed', unit: 'Count', dimensions: { Project: 'p' }, values: [1] },
      {
        name: 'DeliveryDuration',
        unit: 'Seconds',
        dimensions: { Project: 'p' },
        values: Array.from({ length: 200 }, (_, i) => 0.01 + i / 1000),
      },
    ],
  },
  { name: 'sweeper: 50 projects x 5 gauges', data: Array.from({ length: 50 }, (_, p) => gauges(p)).flat() },
]

/** The hand-written writer lib/metrics/emf.ts had before Powertools: plain objects, no validation. */
function handWritten(namespace: string, timestamp: number, data: readonly Datum[], service: string): Array<Record<string, unknown>> {
  const groups = new Map<string, { dimensions: Record<string, string>; metrics: Map<string, { unit: string; values: number[] }> }>()
  for (const d of data) {
    const key = JSON.stringify(Object.entries(d.dimensions).sort(([a], [b]) => a.localeCompare(b)))
    const group = groups.get(key) ?? { dimensions: d.dimensions, metrics: new Map() }
    groups.set(key, group)
    const metric = group.metrics.get(d.name) ?? { unit: d.unit, values: [] }
    group.metrics.set(d.name, metric)
    metric.values.push(...d.values)
  }
  const docs: Array<Record<string, unknown>> = []
  for (const { dimensions, metrics } of groups.values()) {
    const own = Object.keys(dimensions)
    const rollup = ['service', ...own.filter(k => ROLLUP_KEEP.has(k))]
    const sets = own.length === 0 ? [rollup] : [['service', ...own], rollup]
    const longest = Math.max(...[...metrics.values()].map(m => m.values.length))
    for (let from = 0; from < longest; from += EMF_MAX_VALUES) {
      const part = [...metrics]
        .map(([name, m]) => ({ name, unit: m.unit, values: m.values.slice(from, from + EMF_MAX_VALUES) }))
        .filter(m => m.values.length > 0)
      docs.push({
        _aws: {
          Timestamp: timestamp,
          CloudWatchMetrics: [{ Namespace: namespace, Dimensions: sets, Metrics: part.map(m => ({ Name: m.name, Unit: m.unit })) }],
        },
        service,
        ...dimensions,
        ...Object.fromEntries(part.map(m => [m.name, m.values.length === 1 ? m.values[0] : m.values])),
      })
    }
  }
  return docs
}

const writers = {
  'hand-written': (data: readonly Datum[]) => handWritten(NAMESPACE, Date.now(), data, EMF_SERVICE).map(d => JSON.stringify(d)),
  Powertools: (data: readonly Datum[]) => emfDocuments(NAMESPACE, Date.now(), data, EMF_SERVICE).map(d => JSON.stringify(d)),
}

/** Microseconds per invocation's documents (serialized, as the logger writes them) over `iterations` runs. */
function measure(write: () => string[], iterations: number): number {
  let lines = 0
  const start = performance.now()
  for (let i = 0; i < iterations; i++) lines += write().length
  const us = ((performance.now() - start) * 1000) / iterations
  if (lines === 0) throw new Error('no documents written')
  return us
}

const rounds = Number(process.argv[2] ?? 7)
const iterations = Number(process.argv[3] ?? 2000)
const rows: string[][] = []
for (const w of WORKLOADS) {
  const runs: Record<keyof typeof writers, number[]> = { 'hand-written': [], Powertools: [] }
  for (let r = 0; r < rounds; r++) {
    // Alternate which writer goes first, so neither always runs on a warmer heap.
    const order: Array<keyof typeof writers> = r % 2 ? ['Powertools', 'hand-written'] : ['hand-written', 'Powertools']
    for (const name of order) runs[name].push(measure(() => writers[name](w.data), iterations))
  }
  const ours = summary(runs['hand-written']).median
  const theirs = summary(runs.Powertools).median
  rows.push([
    w.name,
    String(writers['hand-written'](w.data).length),
    String(writers.Powertools(w.data).length),
    ours.toFixed(1),
    theirs.toFixed(1),
    `${(theirs / ours).toFixed(2)}x`,
  ])
}
console.log(`EMF documents of one invocation, median of ${rounds} interleaved rounds x ${iterations} (Node ${process.versions.node})`)
console.log(
  table(['workload', 'docs hand-written', 'docs Powertools', 'hand-written µs', 'Powertools µs', 'Powertools / hand-written'], rows),
)
