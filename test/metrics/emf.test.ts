import { describe, expect, it } from 'vitest'
import { createHandler as createDispatch } from '../../functions/dispatch.js'
import { createHandler as createEnqueue } from '../../functions/enqueue.js'
import { createHandler as createSweeper } from '../../functions/sweeper.js'
import { createMetrics } from '../../lib/metrics/registry.js'
import { EMF_METRICS } from '../../lib/metrics/emf-metrics.js'
import { cloudWatchName, EMF_SERVICE, emfDocuments, MAX_VALUES_PER_METRIC } from '../../lib/metrics/emf.js'
import { schemaFor } from '../helpers/events.js'
import { useHarness } from '../helpers/harness.js'
import { createContext, signalEvent } from '../helpers/lambda.js'
import { createPayload, TX } from '../fixtures/schemas.js'

// The units CloudWatch accepts (MetricDatum.Unit), which an EMF MetricDefinition's Unit must be one of.
const UNITS = new Set([
  'Seconds',
  'Microseconds',
  'Milliseconds',
  'Bytes',
  'Kilobytes',
  'Megabytes',
  'Gigabytes',
  'Terabytes',
  'Bits',
  'Kilobits',
  'Megabits',
  'Gigabits',
  'Terabits',
  'Percent',
  'Count',
  'Bytes/Second',
  'Kilobytes/Second',
  'Megabytes/Second',
  'Gigabytes/Second',
  'Terabytes/Second',
  'Bits/Second',
  'Kilobits/Second',
  'Megabits/Second',
  'Gigabits/Second',
  'Terabits/Second',
  'Count/Second',
  'None',
])
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)
const onlyKeys = (o: Record<string, unknown>, allowed: string[]) => Object.keys(o).filter(k => !allowed.includes(k))

/**
 * The problems of one log line measured against the EMF specification's required structure
 * (docs.aws.amazon.com, "Specification: Embedded metric format"): the line is one JSON object with
 * nothing around it; `_aws` holds a millisecond `Timestamp` and a `CloudWatchMetrics` array of
 * MetricDirectives { Namespace, Dimensions: DimensionSet[], Metrics: MetricDefinition[] } with no
 * other members; a DimensionSet has at most 30 keys, each naming a root member holding a string;
 * at most 100 MetricDefinitions { Name, Unit?, StorageResolution? }, each naming a root member
 * holding a number or an array of at most 100 numbers; a document is at most 1 MB.
 */
function emfProblems(line: string): string[] {
  const problems: string[] = []
  if (Buffer.byteLength(line) > 1024 * 1024) problems.push('larger than 1 MB')
  let root: unknown
  try {
    root = JSON.parse(line)
  } catch {
    return ['not JSON']
  }
  if (!isObject(root)) return ['root is not an object']
  const aws = root._aws
  if (!isObject(aws)) return ['_aws is not an object']
  if (!Number.isInteger(aws.Timestamp) || Number(aws.Timestamp) < 1e12) problems.push('_aws.Timestamp is not epoch milliseconds')
  if (!Array.isArray(aws.CloudWatchMetrics)) return [...problems, '_aws.CloudWatchMetrics is not an array']
  for (const d of aws.CloudWatchMetrics) {
    if (!isObject(d)) {
      problems.push('a directive is not an object')
      continue
    }
    if (onlyKeys(d, ['Namespace', 'Dimensions', 'Metrics']).length)
      problems.push(`directive has extra members ${onlyKeys(d, ['Namespace', 'Dimensions', 'Metrics'])}`)
    if (typeof d.Namespace !== 'string' || d.Namespace.length === 0 || d.Namespace.length > 255)
      problems.push('Namespace is not a non-empty string')
    if (!Array.isArray(d.Dimensions)) problems.push('Dimensions is not an array')
    for (const set of Array.isArray(d.Dimensions) ? d.Dimensions : []) {
      if (!Array.isArray(set) || set.length > 30) {
        problems.push('a DimensionSet is not an array of at most 30 keys')
        continue
      }
      for (const key of set) {
        const value = typeof key === 'string' ? root[key] : undefined
        if (typeof value !== 'string' || value.length === 0 || value.length > 1024)
          problems.push(`dimension ${String(key)} has no string value at the root`)
      }
    }
    if (!Array.isArray(d.Metrics) || d.Metrics.length > 100) {
      problems.push('Metrics is not an array of at most 100')
      continue
    }
    for (const m of d.Metrics) {
      if (!isObject(m) || typeof m.Name !== 'string' || m.Name.length === 0 || m.Name.length > 255) {
        problems.push('a MetricDefinition has no Name')
        continue
      }
      if (onlyKeys(m, ['Name', 'Unit', 'StorageResolution']).length) problems.push(`${m.Name} has extra members`)
      if (m.Unit !== undefined && !UNITS.has(String(m.Unit))) problems.push(`${m.Name} has unit ${String(m.Unit)}`)
      if (m.StorageResolution !== undefined && m.StorageResolution !== 1 && m.StorageResolution !== 60)
        problems.push(`${m.Name} has a bad StorageResolution`)
      const value = root[m.Name]
      const numbers = Array.isArray(value) ? value : [value]
      if (numbers.length === 0 || numbers.length > 100 || !numbers.every(n => typeof n === 'number' && Number.isFinite(n)))
        problems.push(`${m.Name} has no number (or up to 100 numbers) at the root`)
    }
  }
  return problems
}

type Emf = Record<string, unknown> & {
  _aws: { CloudWatchMetrics: Array<{ Namespace: string; Dimensions: string[][]; Metrics: Array<{ Name: string; Unit: string }> }> }
}
const emfLines = (lines: string[]) => lines.filter(l => l.includes('"_aws"'))
const docs = (lines: string[]) => emfLines(lines).map(l => JSON.parse(l) as Emf)
/** Every (metric, own dimension values) → value found in the documents; the `service` default is checked apart. */
const values = (documents: Emf[]) =>
  documents.flatMap(doc =>
    doc._aws.CloudWatchMetrics.flatMap(d =>
      d.Metrics.map(m => ({
        name: m.Name,
        unit: m.Unit,
        dims:
          d.Dimensions[0]
            ?.filter(k => k !== 'service')
            .map(k => `${k}=${String(doc[k])}`)
            .join(',') ?? '',
        value: doc[m.Name],
      })),
    ),
  )

describe('the EMF writer', () => {
  it('checks what the specification requires (the checker itself rejects broken documents)', () => {
    expect(
      emfProblems(
        '{"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["Project"]],"Metrics":[{"Name":"A","Unit":"Count"}]}]},"Project":"p","A":1}',
      ),
    ).toEqual([])
    expect(
      emfProblems(
        '{"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["Project"]],"Metrics":[{"Name":"A","Unit":"Count"}]}]},"A":1}',
      ),
    ).toEqual(['dimension Project has no string value at the root'])
    expect(
      emfProblems(
        '{"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"A","Unit":"Count"}]}]}}',
      ),
    ).toEqual(['A has no number (or up to 100 numbers) at the root'])
    expect(emfProblems('x {}')).toEqual(['not JSON'])
  })

  it('writes one document per set of dimension values, and more when a metric has more values than one holds', () => {
    // EMF allows 100; Powertools publishes on its own, past the logger, when a metric reaches 100.
    expect(MAX_VALUES_PER_METRIC).toBeLessThan(100)
    const durations = Array.from({ length: MAX_VALUES_PER_METRIC + 5 }, (_, i) => i / 100)
    const out = emfDocuments('Test/NS', 1_700_000_000_000, [
      { name: 'EventsEnqueued', unit: 'Count', dimensions: { Project: 'a' }, values: [3] },
      { name: 'DeliveryDuration', unit: 'Seconds', dimensions: { Project: 'a' }, values: durations },
      { name: 'EventsEnqueued', unit: 'Count', dimensions: { Project: 'b' }, values: [1] },
      { name: 'MetricsPushFailed', unit: 'Count', dimensions: {}, values: [2] },
    ]).map(d => JSON.stringify(d))
    expect(out).toHaveLength(4)
    for (const line of out) expect(emfProblems(line), line).toEqual([])
    const parsed = docs(out)
    expect(parsed[0]).toMatchObject({ Project: 'a', EventsEnqueued: 3, DeliveryDuration: durations.slice(0, MAX_VALUES_PER_METRIC) })
    expect(parsed[1]).toMatchObject({ Project: 'a', DeliveryDuration: durations.slice(MAX_VALUES_PER_METRIC) })
    expect(parsed[1]).not.toHaveProperty('EventsEnqueued')
    expect(parsed[3]).toMatchObject({ MetricsPushFailed: 2 })
    expect(parsed[3]?._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service']])
  })

  it('adds the service dimension to every document and a rollup set that keeps only it and Reason', () => {
    const out = emfDocuments(
      'Test/NS',
      1_700_000_000_000,
      [
        { name: 'EventsFailed', unit: 'Count', dimensions: { Project: 'a' }, values: [1] },
        { name: 'PausedTargetEvents', unit: 'Count', dimensions: { Project: 'a', Target: 't', Reason: 'down' }, values: [4] },
        { name: 'MetricsPushFailed', unit: 'Count', dimensions: {}, values: [2] },
      ],
      'svc',
    ).map(d => JSON.stringify(d))
    for (const line of out) expect(emfProblems(line), line).toEqual([])
    expect(docs(out).map(d => [d.service, d._aws.CloudWatchMetrics[0]?.Dimensions])).toEqual([
      ['svc', [['service', 'Project'], ['service']]],
      [
        'svc',
        [
          ['service', 'Project', 'Target', 'Reason'],
          ['service', 'Reason'],
        ],
      ],
      ['svc', [['service']]],
    ])
  })

  it('adds the stage, when one is set, to every dimension set beside service, so a stage reads only its own series', () => {
    const out = emfDocuments(
      'Test/NS',
      1_700_000_000_000,
      [
        { name: 'EventsFailed', unit: 'Count', dimensions: { Project: 'a' }, values: [1] },
        { name: 'MetricsPushFailed', unit: 'Count', dimensions: {}, values: [2] },
      ],
      'svc',
      'prod',
    ).map(d => JSON.stringify(d))
    for (const line of out) expect(emfProblems(line), line).toEqual([])
    expect(docs(out).map(d => [d.stage, d._aws.CloudWatchMetrics[0]?.Dimensions])).toEqual([
      [
        'prod',
        [
          ['service', 'stage', 'Project'],
          ['service', 'stage'],
        ],
      ],
      ['prod', [['service', 'stage']]],
    ])
    // Without a stage nothing else changes (and a writer made for one stage is not reused for another).
    const plain = docs(
      emfDocuments('Test/NS', 1_700_000_000_000, [{ name: 'MetricsPushFailed', unit: 'Count', dimensions: {}, values: [2] }], 'svc').map(
        d => JSON.stringify(d),
      ),
    )
    expect(plain.map(d => [d.stage, d._aws.CloudWatchMetrics[0]?.Dimensions])).toEqual([[undefined, [['service']]]])
  })

  it('names every counter and histogram of the registry as documented, so a new one cannot go out unnamed', async () => {
    const documented = new Map<string, string>(EMF_METRICS.map(m => [m.source, m.name]))
    for (const m of await createMetrics().registry.getMetricsAsJSON()) {
      expect(documented.get(m.name), m.name).toBe(cloudWatchName(m.name))
    }
  })
})

describe('EMF lines from the handlers', () => {
  // Distinct answer times, so one invocation's durations differ.
  let call = 0
  const env = useHarness({
    config: { CLOUDWATCH_METRICS: 'true', CLOUDWATCH_NAMESPACE: 'Wired/Actions' },
    receiver: (_, res) => {
      setTimeout(() => res.end(), [1, 40, 10][call++ % 3])
    },
  })

  it('write the counters, every delivery duration and the sweeper gauges as valid EMF, one request id per invocation', async () => {
    await schemaFor(env.deps, 'emf', { t: { url: env.rx.url } })
    const logs = env.captureLogs()
    const enqueueCtx = createContext()
    const dispatchCtx = createContext()
    const sweepCtx = createContext()
    try {
      await createEnqueue(() => env.deps)(
        { project: 'emf', transactionId: TX, events: [1, 2, 3, 4, 5].map(i => ({ trigger: 'to_t', payload: createPayload(i) })) },
        enqueueCtx,
      )
      await createDispatch(() => env.deps)(signalEvent('emf'), dispatchCtx)
      await createSweeper(() => env.deps)({}, sweepCtx)
    } finally {
      logs.restore()
    }
    const lines = emfLines(logs.lines)
    expect(lines.length).toBeGreaterThan(0)
    for (const line of lines) expect(emfProblems(line), line).toEqual([])
    const parsed = docs(logs.lines)
    expect(new Set(parsed.flatMap(d => d._aws.CloudWatchMetrics.map(c => c.Namespace)))).toEqual(new Set(['Wired/Actions']))
    // Powertools' model: a service dimension on every document, and a rollup under it (what the template's alarms read).
    for (const doc of parsed) {
      expect(doc.service).toBe(EMF_SERVICE)
      const sets = doc._aws.CloudWatchMetrics[0]?.Dimensions ?? []
      expect(sets.at(-1)?.filter(k => k !== 'Reason')).toEqual(['service'])
      if (sets.length > 1) expect(sets[0]).toContain('service')
    }
    const byRequest = (ctx: { awsRequestId: string }) => values(parsed.filter(d => d.awsRequestId === ctx.awsRequestId))

    expect(byRequest(enqueueCtx)).toEqual([{ name: 'EventsEnqueued', unit: 'Count', dims: 'Project=emf', value: 5 }])
    const dispatched = byRequest(dispatchCtx)
    expect(dispatched).toContainEqual({ name: 'EventsSucceeded', unit: 'Count', dims: 'Project=emf', value: 5 })
    // One real value per delivered batch (batchSize 1), not a mean.
    const durations = dispatched.find(v => v.name === 'DeliveryDuration')?.value
    expect(Array.isArray(durations) && durations.length).toBe(5)
    const numbers = Array.isArray(durations) ? durations.map(Number) : []
    expect(Math.min(...numbers)).toBeLessThan(Math.max(...numbers))
    const swept = byRequest(sweepCtx)
    expect(swept).toContainEqual({ name: 'DueEvents', unit: 'Count', dims: 'Project=emf,State=created', value: 0 })
    expect(swept).toContainEqual({ name: 'FailedEvents', unit: 'Count', dims: 'Project=emf', value: 0 })
    expect(swept).toContainEqual({ name: 'OldestDueEventAgeSeconds', unit: 'Seconds', dims: 'Project=emf', value: 0 })
    // Nothing is due after the drain: the heartbeat is the pass time, so its age is (about) zero.
    const age = swept.find(v => v.name === 'HeartbeatAgeSeconds' && v.dims === 'Project=emf')?.value
    expect(typeof age === 'number' && age >= 0 && age <= 5).toBe(true)
  })

  it('write nothing when an invocation changed no counter', async () => {
    const logs = env.captureLogs()
    await createEnqueue(() => env.deps)({ project: 'emf', transactionId: TX, events: [] }, createContext()).catch(() => undefined)
    logs.restore()
    expect(emfLines(logs.lines)).toEqual([])
  })
})
