import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { gunzipSync } from 'node:zlib'
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createLogger, setLogSink, type Sink } from '../lib/log.js'
import { CLOUDWATCH_METRICS_DOC, cloudWatchName, createCloudWatchSink, MAX_DATUMS_PER_REQUEST } from '../lib/metrics-cloudwatch.js'
import { createMetrics, createSweeperGauges } from '../lib/metrics.js'
import { freePort } from './helpers/net.js'

/*
 * The real SDK client against a local stand-in for CloudWatch. @aws-sdk/client-cloudwatch 3.1164.0
 * speaks AWS JSON 1.0 (awsQueryCompatible) for PutMetricData: POST / with
 * `Content-Type: application/x-amz-json-1.0`, `X-Amz-Target: GraniteServiceVersion20100801.PutMetricData`,
 * a JSON body (timestamps as epoch seconds; gzip with `Content-Encoding: gzip` from 10 KiB on, the
 * service's request-compression trait) and an empty JSON object as the success answer. Anything
 * else is answered 400 and recorded, so an SDK upgrade that changes the protocol fails these tests loudly.
 */

const NAMESPACE = 'Test/Actions'
const TARGET = 'GraniteServiceVersion20100801.PutMetricData'
const JSON_1_0 = 'application/x-amz-json-1.0'

type WireDimension = { Name: string; Value: string }
type WireDatum = {
  MetricName: string
  Dimensions?: WireDimension[]
  Value?: number
  Unit?: string
  Timestamp?: number
  StatisticValues?: { SampleCount: number; Sum: number; Minimum: number; Maximum: number }
}
type PutRequest = { Namespace: string; MetricData: WireDatum[] }
type Answer = 'ok' | 'fail' | 'hang'

type FakeCloudWatch = {
  url: string
  /** Every PutMetricData the SDK sent, decoded, answered successfully or not. */
  requests: PutRequest[]
  /** `Content-Encoding` of each decoded request ('identity' when absent). */
  encodings: string[]
  /** Datums of requests answered with success only. */
  accepted(): WireDatum[]
  protocolErrors: string[]
  /** Decides the answer to the n-th request (1-based). */
  answer: (n: number) => Answer
  stop(): Promise<void>
}

async function startFakeCloudWatch(port = 0): Promise<FakeCloudWatch> {
  const requests: PutRequest[] = []
  const acceptedRequests: PutRequest[] = []
  const protocolErrors: string[] = []
  const encodings: string[] = []
  const fake: FakeCloudWatch = {
    url: '',
    requests,
    encodings,
    accepted: () => acceptedRequests.flatMap(r => r.MetricData),
    protocolErrors,
    answer: () => 'ok',
    stop: () => new Promise(resolve => {
      // Hung requests would keep close() waiting forever.
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
  const server: Server = createServer((req, res) => {
    readBody(req).then(body => {
      const problem = protocolProblem(req, body)
      if (problem) {
        protocolErrors.push(problem)
        return sendJson(res, 400, { __type: 'UnknownOperationException', message: problem })
      }
      const put = parsePut(body)
      requests.push(put)
      encodings.push(req.headers['content-encoding'] ?? 'identity')
      const answer = fake.answer(requests.length)
      if (answer === 'hang') return
      if (answer === 'fail') {
        // awsQueryCompatible services also name the error in this header; the SDK reads either.
        res.setHeader('x-amzn-query-error', 'InternalServiceFault;Receiver')
        return sendJson(res, 500, { __type: 'com.amazonaws.cloudwatch#InternalServiceFault', message: 'injected failure' })
      }
      acceptedRequests.push(put)
      sendJson(res, 200, {})
    }, (error: unknown) => {
      protocolErrors.push(`unreadable body: ${String(error)}`)
      sendJson(res, 400, { __type: 'SerializationException' })
    })
  })
  await new Promise<void>(resolve => server.listen(port, '127.0.0.1', resolve))
  const addr = server.address()
  fake.url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : port}`
  return fake
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = []
    req.on('data', (c: Buffer) => parts.push(c))
    req.on('end', () => {
      const raw = Buffer.concat(parts)
      try {
        resolve((req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8'))
      } catch (error) {
        reject(error)
      }
    })
    req.on('error', reject)
  })
}

function protocolProblem(req: IncomingMessage, body: string): string | undefined {
  if (req.method !== 'POST' || req.url !== '/') return `unexpected ${req.method} ${req.url}`
  if (req.headers['content-type'] !== JSON_1_0) return `unexpected content-type ${req.headers['content-type']}`
  if (req.headers['x-amz-target'] !== TARGET) return `unexpected target ${req.headers['x-amz-target']}`
  if (!req.headers.authorization?.startsWith('AWS4-HMAC-SHA256 ')) return 'request not signed with SigV4'
  try {
    parsePut(body)
  } catch (error) {
    return `undecodable body: ${String(error)}`
  }
  return undefined
}

function parsePut(body: string): PutRequest {
  const parsed: unknown = JSON.parse(body)
  if (typeof parsed !== 'object' || parsed === null || !('Namespace' in parsed) || !('MetricData' in parsed)) throw new Error('not a PutMetricData body')
  const { Namespace, MetricData } = parsed
  if (typeof Namespace !== 'string' || !Array.isArray(MetricData)) throw new Error('not a PutMetricData body')
  return { Namespace, MetricData }
}

function sendJson(res: ServerResponse, status: number, body: object): void {
  res.writeHead(status, { 'content-type': JSON_1_0 })
  res.end(JSON.stringify(body))
}

/** A datum reduced to what the assertions compare; dimensions as `Name=Value` in sent order. */
function brief(d: WireDatum) {
  return { name: d.MetricName, dims: (d.Dimensions ?? []).map(x => `${x.Name}=${x.Value}`).join(','), unit: d.Unit, value: d.Value }
}

function briefs(data: WireDatum[]) {
  return data.map(brief).sort((a, b) => `${a.name}|${a.dims}`.localeCompare(`${b.name}|${b.dims}`))
}

function client(url: string): CloudWatchClient {
  return new CloudWatchClient({ endpoint: url, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } })
}

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
