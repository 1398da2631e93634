import { Metrics as PowertoolsMetrics } from '@aws-lambda-powertools/metrics'
import type { Registry } from 'prom-client'
import type { Fields, Logger } from '../log.js'
import { EMF_METRICS, type EmfUnit } from './emf-metrics.js'
import { PROJECT_LABEL, type Metrics, type SweeperGauges } from './registry.js'

/**
 * Values of one metric in one document: EMF allows 100, but Powertools publishes on its own (to its
 * own console, past the invocation's logger and its request id) when a metric reaches 100; more go
 * into further documents.
 */
export const MAX_VALUES_PER_METRIC = 99
/** Powertools' own warnings (e.g. an old timestamp in a test) are not the invocation's business. */
const QUIET = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} }
/**
 * Durations kept between two flushes. One invocation delivers far fewer batches than this; the cap
 * only keeps a runaway (or a flush that never comes) from growing memory without bound.
 */
export const MAX_BUFFERED_DURATIONS = 10_000

/** The `service` dimension's value: the serverless service name, which the template's alarms name too. */
export const EMF_SERVICE = 'contember-actions'
/** Dimensions a rollup keeps besides the defaults: few values, and the alarms tell them apart. */
const ROLLUP_DIMENSIONS = new Set(['Reason'])

/** Prometheus label → CloudWatch dimension (today's names; other labels become PascalCase). */
const DIMENSION_NAMES: Record<string, string> = { [PROJECT_LABEL]: 'Project', state: 'State' }
const NAME_PREFIX = 'contember_actions_'

/** The values of one metric under one set of dimension values. */
export type Datum = { name: string; unit: EmfUnit; dimensions: Record<string, string>; values: number[] }

/**
 * EMF documents for `data`, written by Powertools' Metrics: one per set of dimension values (a
 * document holds one value per dimension key), and further ones when a metric has more values
 * than a document holds. Each carries the `service` dimension and, besides its own dimension set,
 * the rollup: `service` plus the dimensions a rollup keeps. Each is one log line.
 */
export function emfDocuments(
  namespace: string,
  timestamp: number,
  data: readonly Datum[],
  service: string = EMF_SERVICE,
  stage?: string,
): Fields[] {
  const writer = powertoolsWriter(namespace, service, stage)
  const docs: Fields[] = []
  // Whatever happens, nothing stays stored for the next call (the writer is shared).
  try {
    for (const group of groupByDimensions(data)) docs.push(...groupDocuments(writer, group, timestamp))
  } finally {
    writer.clearMetrics()
    writer.clearDimensions()
  }
  return docs
}

/** One group's documents: its own dimension set and the rollup, at most MAX_VALUES_PER_METRIC values of a metric each. */
function groupDocuments(writer: PowertoolsMetrics, { dimensions, metrics }: Group, timestamp: number): Fields[] {
  const docs: Fields[] = []
  const rollup = Object.fromEntries(Object.entries(dimensions).filter(([k]) => ROLLUP_DIMENSIONS.has(k)))
  const longest = Math.max(...[...metrics.values()].map(m => m.values.length))
  for (let from = 0; from < longest; from += MAX_VALUES_PER_METRIC) {
    // No own dimensions: Powertools writes the `service` set alone, which is the rollup.
    if (Object.keys(dimensions).length > 0) writer.addDimensions(dimensions).addDimensions(rollup)
    for (const [name, m] of metrics) for (const v of m.values.slice(from, from + MAX_VALUES_PER_METRIC)) writer.addMetric(name, m.unit, v)
    writer.setTimestamp(timestamp)
    docs.push({ ...writer.serializeMetrics() })
    writer.clearMetrics()
    writer.clearDimensions()
  }
  return docs
}

// Constructing Powertools' Metrics costs ~0.15 ms (it reads its environment), more than writing a
// document: one writer per namespace, service and stage, built on first use. The stage is a default
// dimension: Powertools adds it, as it does `service`, to every dimension set, the rollup included.
const writers = new Map<string, PowertoolsMetrics>()

function powertoolsWriter(namespace: string, service: string, stage: string | undefined): PowertoolsMetrics {
  const key = JSON.stringify([namespace, service, stage ?? null])
  let writer = writers.get(key)
  if (!writer) {
    const defaultDimensions: Record<string, string> = stage === undefined ? {} : { stage }
    writer = new PowertoolsMetrics({ namespace, serviceName: service, defaultDimensions, logger: QUIET })
    writers.set(key, writer)
  }
  return writer
}

type Group = { dimensions: Record<string, string>; metrics: Map<string, { unit: EmfUnit; values: number[] }> }

/** `data` by its dimension values, each metric's values together. */
function groupByDimensions(data: readonly Datum[]): Group[] {
  const groups = new Map<string, Group>()
  for (const d of data) {
    if (d.values.length === 0) continue
    const key = JSON.stringify(Object.entries(d.dimensions).sort(([a], [b]) => a.localeCompare(b)))
    const group = groups.get(key) ?? { dimensions: d.dimensions, metrics: new Map() }
    groups.set(key, group)
    const metric = group.metrics.get(d.name) ?? { unit: d.unit, values: [] }
    group.metrics.set(d.name, metric)
    metric.values.push(...d.values)
  }
  return [...groups.values()]
}

export type EmfSink = {
  /** The registry's view whose delivery durations are also kept raw (Prometheus histograms keep buckets only). */
  tap(metrics: Metrics): Metrics
  /** Writes what the counters gained and every duration observed since the last flush. Never throws. */
  flush(registry: Registry, log: Logger): Promise<void>
  /** Writes the sweeper's gauges as absolute values. Never throws. */
  gauges(gauges: SweeperGauges, log: Logger): Promise<void>
}

/**
 * Writes metrics as EMF lines through the invocation's logger (stdout in Lambda): CloudWatch Logs
 * turns them into metrics, with no API call, no IAM permission and no added latency.
 */
export function createEmfSink(namespace: string, service: string = EMF_SERVICE, stage?: string): EmfSink {
  const deltas = counterDeltas()
  let durations = new Map<string, number[]>()
  let buffered = 0
  let dropped = 0
  const write = (data: Datum[], log: Logger) => {
    for (const doc of emfDocuments(namespace, Date.now(), data, service, stage)) log.emit(doc)
  }
  return {
    tap: metrics => ({
      ...metrics,
      forProject: project => {
        const view = metrics.forProject(project)
        return {
          ...view,
          deliveryDuration: seconds => {
            view.deliveryDuration(seconds)
            if (buffered >= MAX_BUFFERED_DURATIONS) return void dropped++
            buffered++
            const list = durations.get(project) ?? []
            durations.set(project, list)
            list.push(seconds)
          },
        }
      },
    }),
    flush: async (registry, log) => {
      const taken = durations
      const lost = dropped
      durations = new Map()
      buffered = dropped = 0
      try {
        const data = await deltas(registry)
        for (const [project, values] of taken)
          data.push({ name: 'DeliveryDuration', unit: 'Seconds', dimensions: { Project: project }, values })
        write(data, log)
        if (lost > 0) log.warn('Dropped delivery durations beyond the EMF buffer', { dropped: lost })
      } catch (error) {
        log.warn('Could not write EMF metrics', { error })
      }
    },
    gauges: async (gauges, log) => {
      try {
        write(await gaugeData(gauges), log)
      } catch (error) {
        log.warn('Could not write EMF metrics', { error })
      }
    },
  }
}

/** The CloudWatch name of a Prometheus metric: prefix and `_total`/`_seconds` suffix dropped, PascalCase. */
export function cloudWatchName(promName: string): string {
  return pascalCase(promName.replace(NAME_PREFIX, '').replace(/_(total|seconds)$/, ''))
}

/** Reads what every counter series gained since the previous read; a smaller value means a reset, all of it new. */
function counterDeltas(): (registry: Registry) => Promise<Datum[]> {
  const last = new Map<string, number>()
  return async registry => {
    const out: Datum[] = []
    for (const metric of await registry.getMetricsAsJSON()) {
      // The typings declare a numeric enum, the runtime carries 'counter', 'histogram', ...
      if (String(metric.type) !== 'counter') continue
      for (const v of metric.values) {
        const dimensions = dimensionsOf(v.labels)
        const key = metric.name + JSON.stringify(Object.entries(dimensions).sort(([a], [b]) => a.localeCompare(b)))
        const before = last.get(key) ?? 0
        last.set(key, v.value)
        const delta = v.value < before ? v.value : v.value - before
        if (delta > 0) out.push({ name: cloudWatchName(metric.name), unit: 'Count', dimensions, values: [delta] })
      }
    }
    return out
  }
}

/** The sweeper gauges written as absolute values (the heartbeat as its age, see EMF_METRICS). */
const GAUGES = [
  { key: 'heartbeat', name: 'HeartbeatAgeSeconds', unit: 'Seconds' },
  { key: 'dueEvents', name: 'DueEvents', unit: 'Count' },
  { key: 'oldestDueAge', name: 'OldestDueEventAgeSeconds', unit: 'Seconds' },
  { key: 'failedEvents', name: 'FailedEvents', unit: 'Count' },
  { key: 'targetPaused', name: 'TargetPaused', unit: 'Count' },
  { key: 'targetGone', name: 'TargetGone', unit: 'Count' },
  { key: 'pausedEvents', name: 'PausedTargetEvents', unit: 'Count' },
  { key: 'pausedOldestAge', name: 'PausedTargetOldestEventAgeSeconds', unit: 'Seconds' },
] as const satisfies ReadonlyArray<{ key: keyof SweeperGauges; name: string; unit: EmfUnit }>

async function gaugeData(gauges: SweeperGauges): Promise<Datum[]> {
  const out: Datum[] = []
  const nowSeconds = Date.now() / 1000
  for (const g of GAUGES) {
    const { values } = await gauges[g.key].get()
    for (const v of values) {
      // The heartbeat is a Unix time from the database clock; a little skew must not make its age negative.
      const value = g.key === 'heartbeat' ? Math.max(0, Math.round(nowSeconds - v.value)) : v.value
      out.push({ name: g.name, unit: g.unit, dimensions: dimensionsOf(v.labels), values: [value] })
    }
  }
  return out
}

function dimensionsOf(labels: Record<string, string | number | undefined>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(labels)) {
    // CloudWatch rejects empty dimension values; an empty label carries nothing anyway.
    if (value !== undefined && value !== '') out[DIMENSION_NAMES[name] ?? pascalCase(name)] = String(value)
  }
  return out
}

function pascalCase(snake: string): string {
  return snake
    .split('_')
    .filter(Boolean)
    .map(w => w.charAt(0).toUpperCase() + w.slice(1))
    .join('')
}
