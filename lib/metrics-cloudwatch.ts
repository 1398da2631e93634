import { PutMetricDataCommand, type CloudWatchClient, type Dimension, type MetricDatum, type StandardUnit } from '@aws-sdk/client-cloudwatch'
import type { Registry } from 'prom-client'
import type { Logger } from './log.js'
import { PROJECT_LABEL, type SweeperGauges } from './metrics.js'

/**
 * What this engine publishes to CloudWatch (when `CLOUDWATCH_METRICS` is on), written so the README
 * table can be generated from it and a test can hold the sink to it.
 *
 * - `delta` metrics are per-invocation increments of a Prometheus counter of one execution
 *   environment; CloudWatch adds them up, so use the `Sum` statistic (per period) for rates.
 * - `statistic-set` is a histogram's per-invocation `_sum`/`_count` increment. `Average` and
 *   `SampleCount` are exact; `Minimum`/`Maximum` are only the per-invocation mean (Prometheus keeps
 *   no extremes), so do not alarm on them.
 * - `absolute` metrics are the sweeper's exact gauges, sent every pass for every active project
 *   (zeros included), so missing data on them means the sweeper is not running. The heartbeat
 *   timestamp gauge is deliberately not sent: CloudWatch alarms cannot compare a value with "now",
 *   and missing sweeper datums (TreatMissingData = breaching) say the same thing.
 */
export const CLOUDWATCH_METRICS_DOC = {
  namespaceSetting: 'CLOUDWATCH_NAMESPACE',
  defaultNamespace: 'Contember/Actions',
  dimensions: {
    Project: `the \`${PROJECT_LABEL}\` label: the Contember project`,
    State: 'the event state of a due event: created, retrying or processing',
  },
  metrics: [
    { name: 'EventsEnqueued', source: 'contember_actions_events_enqueued_total', kind: 'delta', unit: 'Count', dimensions: ['Project'], statistic: 'Sum', meaning: 'events written by enqueue' },
    { name: 'EventsSucceeded', source: 'contember_actions_events_succeeded_total', kind: 'delta', unit: 'Count', dimensions: ['Project'], statistic: 'Sum', meaning: 'events delivered (terminal)' },
    { name: 'DeliveryAttemptsFailed', source: 'contember_actions_delivery_attempts_failed_total', kind: 'delta', unit: 'Count', dimensions: ['Project'], statistic: 'Sum', meaning: 'failed delivery attempts, retried ones included' },
    { name: 'EventsFailed', source: 'contember_actions_events_failed_total', kind: 'delta', unit: 'Count', dimensions: ['Project'], statistic: 'Sum', meaning: 'events terminally failed (attempts exhausted or unknown target)' },
    { name: 'WorkerCrashed', source: 'contember_actions_worker_crashed_total', kind: 'delta', unit: 'Count', dimensions: ['Project'], statistic: 'Sum', meaning: 'dispatch invocations that crashed' },
    { name: 'MetricsPushFailed', source: 'contember_actions_metrics_push_failed_total', kind: 'delta', unit: 'Count', dimensions: [], statistic: 'Sum', meaning: 'failed pushes to the Pushgateway' },
    { name: 'TargetsHeld', source: 'contember_actions_targets_held_total', kind: 'delta', unit: 'Count', dimensions: ['Project'], statistic: 'Sum', meaning: 'targets a drain held back (events wait, unclaimed)' },
    { name: 'DeliveryDuration', source: 'contember_actions_delivery_duration_seconds', kind: 'statistic-set', unit: 'Seconds', dimensions: ['Project'], statistic: 'Average', meaning: 'duration of webhook delivery requests (one per batch)' },
    { name: 'DueEvents', source: 'contember_actions_due_events', kind: 'absolute', unit: 'Count', dimensions: ['Project', 'State'], statistic: 'Maximum', meaning: 'events due for delivery now, counted by the sweeper' },
    { name: 'OldestDueEventAgeSeconds', source: 'contember_actions_oldest_due_event_age_seconds', kind: 'absolute', unit: 'Seconds', dimensions: ['Project'], statistic: 'Maximum', meaning: 'age of the oldest due event (time since it became due)' },
    { name: 'FailedEvents', source: 'contember_actions_failed_events', kind: 'absolute', unit: 'Count', dimensions: ['Project'], statistic: 'Maximum', meaning: 'events in the terminal failed state, awaiting an operator' },
  ],
} as const

/** PutMetricData accepts at most 1000 datums per request. */
export const MAX_DATUMS_PER_REQUEST = 1000
const DEFAULT_TIMEOUT_MS = 2_000
const NAME_PREFIX = 'contember_actions_'

/** Prometheus label → CloudWatch dimension; other labels become their PascalCase form. */
const DIMENSION_NAMES: Record<string, string> = { [PROJECT_LABEL]: 'Project', state: 'State' }

/** The sweeper gauges sent as absolute values (the heartbeat is left out, see the doc above). */
const GAUGES = [
  { key: 'dueEvents', name: 'DueEvents', unit: 'Count' },
  { key: 'oldestDueAge', name: 'OldestDueEventAgeSeconds', unit: 'Seconds' },
  { key: 'failedEvents', name: 'FailedEvents', unit: 'Count' },
] as const satisfies ReadonlyArray<{ key: keyof SweeperGauges; name: string; unit: StandardUnit }>

export type CloudWatchSinkOptions = {
  namespace: string
  client: CloudWatchClient
  log: Logger
  /** Per request; a slow CloudWatch must not hold an invocation open. Default 2 s. */
  timeoutMs?: number
}

export type CloudWatchSink = {
  /** Sends what every counter and histogram series gained since the last successful flush. Never throws. */
  flushCounters(registry: Registry): Promise<void>
  /** Sends the sweeper's gauges as absolute values. Never throws. */
  putGauges(gauges: SweeperGauges): Promise<void>
}

/**
 * Publishes this environment's metrics to CloudWatch, as an alternative to the Pushgateway.
 *
 * Prometheus counters are cumulative per execution environment, CloudWatch sums what it receives; so
 * `flushCounters` sends per-invocation deltas and remembers, per series, the cumulative value it has
 * successfully sent. A failed request (SDK error, HTTP error or timeout) is logged as
 * `Could not put metrics to CloudWatch` with the error's name/code only, and its series keep their
 * old remembered values, so the next successful flush sends the missed increments too. Datums carry
 * the flush time as timestamp, so increments that were re-sent land in the later period.
 *
 * @example
 * const sink = createCloudWatchSink({ namespace: config.CLOUDWATCH_NAMESPACE, client: new CloudWatchClient({ region: config.AWS_REGION }), log })
 * await sink.flushCounters(metrics.registry) // at the end of every invocation
 */
export function createCloudWatchSink(opts: CloudWatchSinkOptions): CloudWatchSink {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS
  /** Cumulative value last sent successfully, per series key. */
  const sent = new Map<string, number>()
  // Two overlapping flushes would both diff against the same snapshot and send the increments twice.
  let previous: Promise<void> = Promise.resolve()

  const put = async (data: MetricDatum[]): Promise<boolean> => {
    try {
      await opts.client.send(new PutMetricDataCommand({ Namespace: opts.namespace, MetricData: data }), { abortSignal: AbortSignal.timeout(timeoutMs) })
      return true
    } catch (error) {
      opts.log.warn('Could not put metrics to CloudWatch', describeError(error))
      return false
    }
  }

  const flush = async (registry: Registry): Promise<void> => {
    let current: Series[]
    try {
      current = await readSeries(registry)
    } catch (error) {
      opts.log.warn('Could not put metrics to CloudWatch', describeError(error))
      return
    }
    const timestamp = new Date()
    const pending = deltaDatums(current, sent, timestamp)
    for (const chunk of chunks(pending, MAX_DATUMS_PER_REQUEST)) {
      // Later chunks would most likely fail the same way; their increments wait for the next flush.
      if (!(await put(chunk.map(p => p.datum)))) return
      for (const p of chunk) for (const [key, value] of p.commit) sent.set(key, value)
    }
    forgetVanished(sent, current)
  }

  return {
    flushCounters: registry => {
      // flush catches its own failures; the guard only keeps one unforeseen rejection from poisoning the chain.
      previous = previous.then(() => flush(registry)).catch(error => { opts.log.warn('Could not put metrics to CloudWatch', describeError(error)) })
      return previous
    },
    putGauges: async gauges => {
      const timestamp = new Date()
      let data: MetricDatum[]
      try {
        data = await gaugeDatums(gauges, timestamp)
      } catch (error) {
        opts.log.warn('Could not put metrics to CloudWatch', describeError(error))
        return
      }
      for (const chunk of chunks(data, MAX_DATUMS_PER_REQUEST)) if (!(await put(chunk))) return
    },
  }
}

/** The CloudWatch name of a Prometheus metric: prefix and `_total`/`_seconds` suffix dropped, PascalCase. */
export function cloudWatchName(promName: string): string {
  const bare = promName.replace(new RegExp(`^${NAME_PREFIX}`), '').replace(/_(total|seconds)$/, '')
  return pascalCase(bare)
}

/** One counter series or one histogram's `_sum`/`_count` pair, read from the registry. */
type Series =
  | { kind: 'counter'; key: string; name: string; labels: Labels; value: number }
  | { kind: 'histogram'; key: string; name: string; labels: Labels; sum: number; count: number }

type Labels = Record<string, string>
/** A datum to send and the remembered values to store once it has been accepted. */
type Pending = { datum: MetricDatum; commit: Array<[string, number]> }

async function readSeries(registry: Registry): Promise<Series[]> {
  const out: Series[] = []
  for (const metric of await registry.getMetricsAsJSON()) {
    // The typings declare a numeric enum, the runtime carries 'counter', 'histogram', ...
    const kind = String(metric.type)
    if (kind === 'counter') out.push(...counterSeries(metric.name, metric.values))
    if (kind === 'histogram') out.push(...histogramSeries(metric.name, metric.values))
    // Gauges and summaries have no meaningful delta; the sweeper's gauges go through putGauges.
  }
  return out
}

type RawValue = { value: number; labels: Record<string, string | number | undefined>; metricName?: string }

function counterSeries(name: string, values: RawValue[]): Series[] {
  return values.map(v => {
    const labels = stringLabels(v.labels)
    return { kind: 'counter', key: seriesKey(name, labels), name, labels, value: v.value }
  })
}

/** Pairs each label set's `_sum` and `_count`; buckets are not sent (CloudWatch has no cumulative buckets). */
function histogramSeries(name: string, values: RawValue[]): Series[] {
  const byLabels = new Map<string, { labels: Labels; sum: number; count: number }>()
  for (const v of values) {
    const suffix = v.metricName === `${name}_sum` ? 'sum' : v.metricName === `${name}_count` ? 'count' : undefined
    if (!suffix) continue
    const labels = stringLabels(v.labels)
    const key = seriesKey(name, labels)
    const entry = byLabels.get(key) ?? { labels, sum: 0, count: 0 }
    entry[suffix] = v.value
    byLabels.set(key, entry)
  }
  return [...byLabels].map(([key, e]) => ({ kind: 'histogram', key, name, ...e }))
}

function deltaDatums(series: Series[], sent: Map<string, number>, timestamp: Date): Pending[] {
  const out: Pending[] = []
  for (const s of series) {
    const pending = s.kind === 'counter' ? counterDelta(s, sent, timestamp) : histogramDelta(s, sent, timestamp)
    if (pending) out.push(pending)
  }
  return out
}

function counterDelta(s: Extract<Series, { kind: 'counter' }>, sent: Map<string, number>, timestamp: Date): Pending | undefined {
  const delta = increase(s.value, sent.get(s.key))
  if (delta <= 0) return undefined
  return {
    datum: { MetricName: cloudWatchName(s.name), Dimensions: dimensions(s.labels), Unit: 'Count', Value: delta, Timestamp: timestamp },
    commit: [[s.key, s.value]],
  }
}

/**
 * A histogram's increment as a statistic set. Prometheus keeps no per-sample extremes, so Minimum and
 * Maximum are the increment's mean: CloudWatch requires both, and the mean lies between the true ones.
 */
function histogramDelta(s: Extract<Series, { kind: 'histogram' }>, sent: Map<string, number>, timestamp: Date): Pending | undefined {
  const countKey = `${s.key}#count`
  const sumKey = `${s.key}#sum`
  const lastCount = sent.get(countKey)
  // A count below the remembered one means the registry was reset: everything in it is new.
  const reset = lastCount !== undefined && s.count < lastCount
  const count = reset ? s.count : s.count - (lastCount ?? 0)
  if (count <= 0) return undefined
  const sum = reset ? s.sum : s.sum - (sent.get(sumKey) ?? 0)
  const mean = sum / count
  return {
    datum: {
      MetricName: cloudWatchName(s.name), Dimensions: dimensions(s.labels), Unit: histogramUnit(s.name), Timestamp: timestamp,
      StatisticValues: { SampleCount: count, Sum: sum, Minimum: mean, Maximum: mean },
    },
    commit: [[countKey, s.count], [sumKey, s.sum]],
  }
}

/** A counter's growth since the remembered value; a smaller value means it was reset and all of it is new. */
function increase(current: number, last: number | undefined): number {
  if (last === undefined || current < last) return current
  return current - last
}

/** Drops remembered series the registry no longer has, so a re-created series starts from zero. */
function forgetVanished(sent: Map<string, number>, current: Series[]): void {
  const live = new Set(current.flatMap(s => s.kind === 'counter' ? [s.key] : [`${s.key}#count`, `${s.key}#sum`]))
  for (const key of sent.keys()) if (!live.has(key)) sent.delete(key)
}

async function gaugeDatums(gauges: SweeperGauges, timestamp: Date): Promise<MetricDatum[]> {
  const out: MetricDatum[] = []
  for (const g of GAUGES) {
    const { values } = await gauges[g.key].get()
    for (const v of values) {
      out.push({ MetricName: g.name, Dimensions: dimensions(stringLabels(v.labels)), Unit: g.unit, Value: v.value, Timestamp: timestamp })
    }
  }
  return out
}

function histogramUnit(promName: string): StandardUnit {
  return promName.endsWith('_seconds') ? 'Seconds' : 'None'
}

function dimensions(labels: Labels): Dimension[] {
  return Object.entries(labels)
    // CloudWatch rejects empty dimension values; an empty label carries nothing anyway.
    .filter(([, value]) => value !== '')
    .map(([name, value]) => ({ Name: DIMENSION_NAMES[name] ?? pascalCase(name), Value: value }))
}

function stringLabels(labels: Record<string, string | number | undefined>): Labels {
  const out: Labels = {}
  for (const [k, v] of Object.entries(labels)) if (v !== undefined) out[k] = String(v)
  return out
}

/** Metric name plus label set, independent of label order. */
function seriesKey(name: string, labels: Labels): string {
  return name + JSON.stringify(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)))
}

function pascalCase(snake: string): string {
  return snake.split('_').filter(Boolean).map(w => w.charAt(0).toUpperCase() + w.slice(1)).join('')
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/**
 * The error's name, code and HTTP status only: Node's network errors put the endpoint's address in
 * their message, and SDK messages may echo request details.
 */
function describeError(error: unknown): { error: string; status?: number } {
  if (!(error instanceof Error)) return { error: typeof error }
  const code = 'code' in error && typeof error.code === 'string' && error.code !== error.name ? error.code : undefined
  const status = '$metadata' in error ? httpStatus(error.$metadata) : undefined
  return { error: code ? `${error.name} (${code})` : error.name, ...(status !== undefined ? { status } : {}) }
}

function httpStatus(metadata: unknown): number | undefined {
  if (typeof metadata !== 'object' || metadata === null || !('httpStatusCode' in metadata)) return undefined
  return typeof metadata.httpStatusCode === 'number' ? metadata.httpStatusCode : undefined
}
