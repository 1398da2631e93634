import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createLogger, setLogSink, type Sink } from '../lib/log.js'
import { CLOUDWATCH_METRICS_DOC, cloudWatchName, createCloudWatchSink, MAX_DATUMS_PER_REQUEST } from '../lib/metrics-cloudwatch.js'
import { createMetrics, createSweeperGauges } from '../lib/metrics.js'
import { freePort } from './helpers/net.js'
import { brief, briefs, client, startFakeCloudWatch, type FakeCloudWatch, type WireDatum } from './helpers/cloudwatch.js'

// The real SDK client against test/helpers/cloudwatch.ts, a local stand-in speaking its wire protocol.

const NAMESPACE = 'Test/Actions'


let lines: string[] = []
let previousSink: Sink
const log = createLogger('debug')
const warnings = () => lines.map(l => JSON.parse(l) as Record<string, unknown>).filter(r => r.level === 'warn')

beforeEach(() => {
  lines = []
  previousSink = setLogSink(line => { lines.push(line) })
})
afterEach(() => { setLogSink(previousSink) })

describe('CloudWatch sink: counters', () => {
  let cw: FakeCloudWatch
  beforeEach(async () => { cw = await startFakeCloudWatch() })
  afterEach(async () => {
    expect(cw.protocolErrors).toEqual([])
    await cw.stop()
  })

  it('sends every counter of the first flush in full, with names, namespace, Project dimension and unit', async () => {
    const metrics = createMetrics()
    const p = metrics.forProject('p')
    p.enqueued(5)
    p.succeeded(3)
    p.deliveryAttemptFailed(2)
    p.failed(1)
    p.crashed()
    metrics.pushFailures.inc()
    const sink = createCloudWatchSink({ namespace: NAMESPACE, client: client(cw.url), log })

    await sink.flushCounters(metrics.registry)

    expect(cw.requests).toHaveLength(1)
    expect(cw.requests[0]!.Namespace).toBe(NAMESPACE)
    expect(briefs(cw.accepted())).toEqual([
      { name: 'DeliveryAttemptsFailed', dims: 'Project=p', unit: 'Count', value: 2 },
      { name: 'EventsEnqueued', dims: 'Project=p', unit: 'Count', value: 5 },
      { name: 'EventsFailed', dims: 'Project=p', unit: 'Count', value: 1 },
      { name: 'EventsSucceeded', dims: 'Project=p', unit: 'Count', value: 3 },
      { name: 'MetricsPushFailed', dims: '', unit: 'Count', value: 1 },
      { name: 'WorkerCrashed', dims: 'Project=p', unit: 'Count', value: 1 },
    ])
    // The SDK serializes timestamps as epoch seconds; the sink stamps the flush time.
    for (const d of cw.accepted()) expect(Math.abs((d.Timestamp ?? 0) - Date.now() / 1000)).toBeLessThan(60)
    expect(warnings()).toEqual([])
  })

  it('sends only the increments since the previous flush, and no request when nothing changed', async () => {
    const metrics = createMetrics()
    metrics.forProject('p').succeeded(3)
    metrics.forProject('p').enqueued(4)
    const sink = createCloudWatchSink({ namespace: NAMESPACE, client: client(cw.url), log })
    await sink.flushCounters(metrics.registry)

    metrics.forProject('p').succeeded(2)
    metrics.forProject('q').enqueued(1)
    await sink.flushCounters(metrics.registry)

    expect(cw.requests).toHaveLength(2)
    expect(briefs(cw.requests[1]!.MetricData)).toEqual([
      { name: 'EventsEnqueued', dims: 'Project=q', unit: 'Count', value: 1 },
      { name: 'EventsSucceeded', dims: 'Project=p', unit: 'Count', value: 2 },
    ])

    await sink.flushCounters(metrics.registry)
    expect(cw.requests).toHaveLength(2)
  })

  it('sends a histogram increment as a statistic set per project, only when it has samples', async () => {
    const metrics = createMetrics()
    metrics.forProject('p').deliveryDuration(0.2)
    metrics.forProject('p').deliveryDuration(0.4)
    metrics.forProject('q').deliveryDuration(1.5)
    const sink = createCloudWatchSink({ namespace: NAMESPACE, client: client(cw.url), log })
    await sink.flushCounters(metrics.registry)

    const first = cw.requests[0]!.MetricData.filter(d => d.MetricName === 'DeliveryDuration')
    expect(briefs(first)).toEqual([
      { name: 'DeliveryDuration', dims: 'Project=p', unit: 'Seconds', value: undefined },
      { name: 'DeliveryDuration', dims: 'Project=q', unit: 'Seconds', value: undefined },
    ])
    const p1 = first.find(d => d.Dimensions?.[0]?.Value === 'p')!.StatisticValues!
    expect(p1.SampleCount).toBe(2)
    expect(p1.Sum).toBeCloseTo(0.6)
    // Prometheus keeps no extremes: both are the mean (documented approximation).
    expect(p1.Minimum).toBeCloseTo(0.3)
    expect(p1.Maximum).toBeCloseTo(0.3)

    metrics.forProject('p').deliveryDuration(1)
    await sink.flushCounters(metrics.registry)
    const second = cw.requests[1]!.MetricData
    expect(second).toHaveLength(1)
    expect(brief(second[0]!)).toEqual({ name: 'DeliveryDuration', dims: 'Project=p', unit: 'Seconds', value: undefined })
    expect(second[0]!.StatisticValues!.SampleCount).toBe(1)
    expect(second[0]!.StatisticValues!.Sum).toBeCloseTo(1)
  })

  it('survives a 500, logs without the endpoint, and sends the missed increments with the next flush', async () => {
    const metrics = createMetrics()
    const sink = createCloudWatchSink({ namespace: NAMESPACE, client: client(cw.url), log })
    cw.answer = () => 'fail'
    metrics.forProject('p').succeeded(3)
    metrics.forProject('p').deliveryDuration(0.5)

    await expect(sink.flushCounters(metrics.registry)).resolves.toBeUndefined()

    expect(cw.requests.length).toBeGreaterThan(0)
    expect(warnings()).toEqual([expect.objectContaining({ msg: 'Could not put metrics to CloudWatch', error: 'InternalServiceFault', status: 500 })])
    expect(lines.join('\n')).not.toContain('127.0.0.1')

    cw.answer = () => 'ok'
    metrics.forProject('p').succeeded(2)
    await sink.flushCounters(metrics.registry)
    const data = cw.accepted()
    expect(briefs(data.filter(d => d.MetricName === 'EventsSucceeded'))).toEqual([{ name: 'EventsSucceeded', dims: 'Project=p', unit: 'Count', value: 5 }])
    expect(data.find(d => d.MetricName === 'DeliveryDuration')!.StatisticValues!.SampleCount).toBe(1)
  })

  it('gives up on a hanging endpoint after the timeout and resends later', async () => {
    const metrics = createMetrics()
    const sink = createCloudWatchSink({ namespace: NAMESPACE, client: client(cw.url), log, timeoutMs: 300 })
    cw.answer = () => 'hang'
    metrics.forProject('p').enqueued(2)

    const started = Date.now()
    await sink.flushCounters(metrics.registry)
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(warnings()).toEqual([expect.objectContaining({ msg: 'Could not put metrics to CloudWatch', error: expect.stringMatching(/Abort|Timeout/) })])
    expect(lines.join('\n')).not.toContain('127.0.0.1')

    cw.answer = () => 'ok'
    await sink.flushCounters(metrics.registry)
    expect(briefs(cw.accepted())).toEqual([{ name: 'EventsEnqueued', dims: 'Project=p', unit: 'Count', value: 2 }])
  })

  it('splits more than 1000 datums into several requests', async () => {
    const metrics = createMetrics()
    for (let i = 0; i < 1_100; i++) metrics.forProject(`p${i}`).enqueued(1)
    metrics.forProject('p0').succeeded(1)
    const sink = createCloudWatchSink({ namespace: NAMESPACE, client: client(cw.url), log })

    await sink.flushCounters(metrics.registry)

    expect(cw.requests.map(r => r.MetricData.length)).toEqual([MAX_DATUMS_PER_REQUEST, 101])
    // Bodies from 10 KiB on go gzipped; the fake decoded them, so the protocol check above is real.
    expect(cw.encodings).toContain('gzip')
    const data = cw.accepted()
    expect(data.filter(d => d.MetricName === 'EventsEnqueued').reduce((n, d) => n + (d.Value ?? 0), 0)).toBe(1_100)
    expect(new Set(data.map(d => `${d.MetricName}|${d.Dimensions?.[0]?.Value}`)).size).toBe(1_101)
  })

  it('after a failed later chunk resends only that chunk, never the accepted one', async () => {
    const metrics = createMetrics()
    for (let i = 0; i < 1_200; i++) metrics.forProject(`p${i}`).enqueued(1)
    const sink = createCloudWatchSink({ namespace: NAMESPACE, client: client(cw.url), log })
    cw.answer = n => n === 1 ? 'ok' : 'fail'

    await sink.flushCounters(metrics.registry)
    expect(cw.accepted()).toHaveLength(MAX_DATUMS_PER_REQUEST)
    expect(warnings()).toHaveLength(1)

    cw.answer = () => 'ok'
    await sink.flushCounters(metrics.registry)
    const data = cw.accepted()
    expect(data).toHaveLength(1_200)
    expect(new Set(data.map(d => d.Dimensions?.[0]?.Value)).size).toBe(1_200)
  })

  it('does not send an increment twice when flushes overlap', async () => {
    const metrics = createMetrics()
    metrics.forProject('p').succeeded(3)
    const sink = createCloudWatchSink({ namespace: NAMESPACE, client: client(cw.url), log })

    await Promise.all([sink.flushCounters(metrics.registry), sink.flushCounters(metrics.registry)])

    expect(cw.accepted().reduce((n, d) => n + (d.Value ?? 0), 0)).toBe(3)
  })
})

describe('CloudWatch sink: unreachable endpoint', () => {
  it('survives a closed port and sends the missed increments once the endpoint is up', async () => {
    const port = await freePort()
    const metrics = createMetrics()
    const sink = createCloudWatchSink({ namespace: NAMESPACE, client: client(`http://127.0.0.1:${port}`), log })
    metrics.forProject('p').failed(4)

    await expect(sink.flushCounters(metrics.registry)).resolves.toBeUndefined()
    expect(warnings()).toEqual([expect.objectContaining({ msg: 'Could not put metrics to CloudWatch', error: expect.stringContaining('ECONNREFUSED') })])
    expect(lines.join('\n')).not.toContain(String(port))

    const cw = await startFakeCloudWatch(port)
    try {
      metrics.forProject('p').failed(1)
      await sink.flushCounters(metrics.registry)
      expect(briefs(cw.accepted())).toEqual([{ name: 'EventsFailed', dims: 'Project=p', unit: 'Count', value: 5 }])
      expect(cw.protocolErrors).toEqual([])
    } finally {
      await cw.stop()
    }
  })
})

describe('CloudWatch sink: sweeper gauges', () => {
  let cw: FakeCloudWatch
  beforeEach(async () => { cw = await startFakeCloudWatch() })
  afterEach(async () => {
    expect(cw.protocolErrors).toEqual([])
    await cw.stop()
  })

  it('sends due events by Project and State, oldest due age and failed events as absolute values', async () => {
    const gauges = createSweeperGauges()
    const p = { contember_project: 'p' }
    gauges.heartbeat.set(p, Date.now() / 1000)
    gauges.dueEvents.set({ ...p, state: 'created' }, 4)
    gauges.dueEvents.set({ ...p, state: 'retrying' }, 1)
    gauges.dueEvents.set({ ...p, state: 'processing' }, 0)
    gauges.oldestDueAge.set(p, 12.5)
    gauges.failedEvents.set(p, 2)
    const sink = createCloudWatchSink({ namespace: NAMESPACE, client: client(cw.url), log })

    await sink.putGauges(gauges)
    // Absolute values: sending again sends the same values again, not a difference.
    await sink.putGauges(gauges)

    expect(cw.requests).toHaveLength(2)
    expect(cw.requests[0]!.Namespace).toBe(NAMESPACE)
    const expected = [
      { name: 'DueEvents', dims: 'Project=p,State=created', unit: 'Count', value: 4 },
      { name: 'DueEvents', dims: 'Project=p,State=processing', unit: 'Count', value: 0 },
      { name: 'DueEvents', dims: 'Project=p,State=retrying', unit: 'Count', value: 1 },
      { name: 'FailedEvents', dims: 'Project=p', unit: 'Count', value: 2 },
      { name: 'OldestDueEventAgeSeconds', dims: 'Project=p', unit: 'Seconds', value: 12.5 },
    ]
    expect(briefs(cw.requests[0]!.MetricData)).toEqual(expected)
    expect(briefs(cw.requests[1]!.MetricData)).toEqual(expected)
  })

  it('survives a failing endpoint with a warning', async () => {
    const gauges = createSweeperGauges()
    gauges.failedEvents.set({ contember_project: 'p' }, 2)
    cw.answer = () => 'fail'
    const sink = createCloudWatchSink({ namespace: NAMESPACE, client: client(cw.url), log })

    await expect(sink.putGauges(gauges)).resolves.toBeUndefined()
    expect(warnings()).toEqual([expect.objectContaining({ msg: 'Could not put metrics to CloudWatch', error: 'InternalServiceFault' })])
  })
})

describe('CLOUDWATCH_METRICS_DOC', () => {
  it('describes every metric the sink can send, under the name it sends', async () => {
    const docBySource = new Map<string, { name: string }>(CLOUDWATCH_METRICS_DOC.metrics.map(m => [m.source, m]))
    for (const metric of createMetrics().registry.getMetricsAsArray()) {
      expect(docBySource.get(metric.name)?.name, metric.name).toBe(cloudWatchName(metric.name))
    }
    const gaugeNames = CLOUDWATCH_METRICS_DOC.metrics.filter(m => m.kind === 'absolute').map(m => m.name).sort()
    const cw = await startFakeCloudWatch()
    try {
      const gauges = createSweeperGauges()
      gauges.dueEvents.set({ contember_project: 'p', state: 'created' }, 1)
      gauges.oldestDueAge.set({ contember_project: 'p' }, 1)
      gauges.failedEvents.set({ contember_project: 'p' }, 1)
      await createCloudWatchSink({ namespace: NAMESPACE, client: client(cw.url), log }).putGauges(gauges)
      expect([...new Set(cw.accepted().map(d => d.MetricName))].sort()).toEqual(gaugeNames)
    } finally {
      await cw.stop()
    }
  })
})
