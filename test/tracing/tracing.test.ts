// OpenTelemetry end to end: a producer's traceparent through the enqueue Lambda, the
// dispatch Lambda and the webhook request, against a real OTLP/HTTP receiver, Postgres, the SQS
// emulator and receivers on 127.0.0.1.
import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { createHandler as createDispatch } from '../../functions/dispatch.js'
import { createHandler as createEnqueue } from '../../functions/enqueue.js'
import { restRoutes } from '../../lib/admin/rest.js'
import { createRouter } from '../../lib/admin/router.js'
import { setVariables } from '../../lib/db/variables.js'
import { enqueue } from '../../lib/enqueue.js'
import { generateSecret } from '../../lib/delivery/signing.js'
import { schemaFor } from '../helpers/events.js'
import { createContext, signalEvent } from '../helpers/lambda.js'
import { startOtlpReceiver, type ExportedSpan, type OtlpReceiver } from '../helpers/otlp.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'
import { testEnv, type TestEnv } from '../helpers/runtime.js'
import { createPayload, TX } from '../fixtures/schemas.js'

const T = '0af7651916cd43dd8448eb211c80319c'
const S = 'b7ad6b7169203331'
const PRODUCER = `00-${T}-${S}-01`
const SERVER = 2
const CLIENT = 3
const CONSUMER = 5

/** One environment with tracing to `otlp`, a receiver, and the two Lambda handlers over them. */
function useTraced(config: Record<string, string> = {}) {
  const parts: { otlp?: OtlpReceiver; rx?: Receiver; env?: TestEnv } = {}
  let n = 0
  beforeAll(async () => {
    parts.otlp = await startOtlpReceiver()
    parts.rx = await startReceiver()
    parts.env = await testEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: parts.otlp.url, ...config })
  })
  beforeEach(() => {
    n++
    parts.otlp?.reset()
    parts.rx?.requests.splice(0)
    parts.rx?.respond((_, res) => {
      res.end()
    })
  })
  afterAll(async () => {
    await parts.env?.close()
    await parts.rx?.close()
    await parts.otlp?.close()
  })
  const need = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('used before beforeAll')
    return v
  }
  return {
    get otlp() {
      return need(parts.otlp)
    },
    get rx() {
      return need(parts.rx)
    },
    get env() {
      return need(parts.env)
    },
    get project() {
      return `tr${n}`
    },
    enqueue: (body: Record<string, unknown>) => createEnqueue(() => need(parts.env).deps)(body, createContext()),
    dispatch: (project: string) => createDispatch(() => need(parts.env).deps)(signalEvent(project), createContext()),
  }
}

/** One event of `project` enqueued in the producer's trace, with the producer's tracestate. */
const fromProducer = (project: string) => ({
  project,
  transactionId: TX,
  traceparent: PRODUCER,
  tracestate: 'vendor=abc',
  events: [{ trigger: 'to_hook', payload: createPayload(1) }],
})

const named = (spans: ExportedSpan[], name: string) => spans.filter(s => s.name === name)
const allThree = (spans: ExportedSpan[]) => ['actions.enqueue', 'actions.dispatch', 'webhook'].every(n => named(spans, n).length > 0)

describe('traces from the producer to the webhook', () => {
  const t = useTraced()

  it('puts actions.enqueue in the producer trace, stores its context, and links the webhook span to it', async () => {
    await schemaFor(t.env.deps, t.project, { hook: { url: t.rx.url } })
    const result = await t.enqueue(fromProducer(t.project))
    expect(result.written).toBe(1)
    await t.dispatch(t.project)
    const spans = await t.otlp.waitFor(allThree)

    const [enq] = named(spans, 'actions.enqueue')
    expect(enq).toMatchObject({ traceId: T, parentSpanId: S, kind: SERVER, service: 'contember-actions' })
    expect(enq?.attributes).toMatchObject({ 'contember.actions.project': t.project, 'contember.actions.events': 1 })
    const { rows } = await t.env.db.pool.query('SELECT traceparent, tracestate FROM actions_event WHERE project = $1', [t.project])
    expect(rows).toEqual([{ traceparent: `00-${T}-${enq?.spanId}-01`, tracestate: 'vendor=abc' }])

    const [drain] = named(spans, 'actions.dispatch')
    expect(drain).toMatchObject({ kind: CONSUMER })
    expect(drain?.attributes).toMatchObject({ 'contember.actions.project': t.project, 'contember.actions.succeeded': 1 })
    const [hook] = named(spans, 'webhook')
    expect(hook).toMatchObject({ kind: CLIENT, traceId: drain?.traceId, parentSpanId: drain?.spanId })
    expect(hook?.links).toEqual([{ traceId: T, spanId: enq?.spanId }])
    expect(hook?.attributes).toMatchObject({
      'contember.actions.target': 'hook',
      'contember.actions.events': 1,
      'http.response.status_code': 200,
      'contember.actions.outcome': 'delivered',
    })
    // TRACES_TO_WEBHOOKS is off by default, as upstream's propagateToWebhooks.
    expect(t.rx.requests[0]?.headers['traceparent']).toBeUndefined()
  })

  it('starts a trace of its own when the producer sent none or a malformed one, and records a failed webhook as an error', async () => {
    await schemaFor(t.env.deps, t.project, { hook: { url: t.rx.url } })
    t.rx.respond((_, res) => {
      res.statusCode = 500
      res.end()
    })
    // An empty payload fails validation: nothing written, the span marked as an error.
    const refused = t.enqueue({ project: t.project, transactionId: TX, events: [{ trigger: 'to_hook', payload: {} }] })
    await expect(refused).rejects.toThrow('Invalid enqueue request')
    const malformed = { project: t.project, transactionId: TX, traceparent: 'not-a-traceparent' }
    await t.enqueue({ ...malformed, events: [{ trigger: 'to_hook', payload: createPayload(2) }] })
    await t.dispatch(t.project)
    const spans = await t.otlp.waitFor(s => named(s, 'actions.enqueue').length === 2 && named(s, 'webhook').length > 0)
    const [bad, good] = named(spans, 'actions.enqueue')
    expect(bad?.status.code).toBe(2)
    expect(bad?.status.message).toBe('EnqueueValidationError')
    expect(good?.parentSpanId).toBe('')
    expect(good?.traceId).not.toBe(T)
    const [hook] = named(spans, 'webhook')
    expect(hook?.links).toEqual([{ traceId: good?.traceId, spanId: good?.spanId }])
    expect(hook?.attributes).toMatchObject({ 'http.response.status_code': 500, 'contember.actions.outcome': 'down' })
    expect(hook?.status).toMatchObject({ code: 2, message: 'down' })
  })

  it('takes the producer context from HTTP headers when the request body has none', async () => {
    await schemaFor(t.env.deps, t.project, { hook: { url: t.rx.url } })
    await enqueue(
      t.env.deps,
      { project: t.project, transactionId: TX, events: [{ trigger: 'to_hook', payload: createPayload(3) }] },
      { traceparent: PRODUCER },
    )
    await t.env.deps.tracing.flush(t.env.log, () => {})
    const [enq] = named(await t.otlp.waitFor(s => named(s, 'actions.enqueue').length > 0), 'actions.enqueue')
    expect(enq).toMatchObject({ traceId: T, parentSpanId: S })
  })

  it("takes the admin API's traceparent header on POST /v1/projects/:p/events", async () => {
    await schemaFor(t.env.deps, t.project, { hook: { url: t.rx.url } })
    const router = createRouter(restRoutes)
    const body = JSON.stringify({ transactionId: TX, events: [{ trigger: 'to_hook', payload: createPayload(5) }] })
    const headers = { authorization: 'Bearer tracing-system-token', traceparent: PRODUCER, tracestate: 'vendor=api' }
    const res = await router(
      t.env.deps,
      { method: 'POST', path: `/v1/projects/${t.project}/events`, query: new URLSearchParams(), headers, body },
      { systemToken: 'tracing-system-token' },
    )
    expect(res.status).toBe(200)
    await t.env.deps.tracing.flush(t.env.log, () => {})
    const [enq] = named(await t.otlp.waitFor(s => named(s, 'actions.enqueue').length > 0), 'actions.enqueue')
    expect(enq).toMatchObject({ traceId: T, parentSpanId: S })
    const { rows } = await t.env.db.pool.query('SELECT tracestate FROM actions_event WHERE project = $1', [t.project])
    expect(rows).toEqual([{ tracestate: 'vendor=api' }])
  })

  it('writes trace_id and span_id on every log line written inside a span', async () => {
    await schemaFor(t.env.deps, t.project, { hook: { url: t.rx.url } })
    t.rx.respond((_, res) => {
      res.statusCode = 503
      res.end()
    })
    await t.enqueue({ project: t.project, transactionId: TX, events: [{ trigger: 'to_hook', payload: createPayload(4) }] })
    const logs = t.env.captureLogs()
    await t.dispatch(t.project)
    logs.restore()
    const [hook] = named(await t.otlp.waitFor(s => named(s, 'webhook').length > 0), 'webhook')
    const line = logs.records().find(r => r['msg'] === 'Webhook target responded with an error status')
    expect(line).toMatchObject({ trace_id: hook?.traceId, span_id: hook?.spanId })
    // Outside any span (the middleware's flush lines, say) no ids are made up.
    const outside = logs.records().filter(r => r['trace_id'] === undefined)
    expect(outside.every(r => r['span_id'] === undefined)).toBe(true)
  })
})

describe('trace context to receivers (TRACES_TO_WEBHOOKS)', () => {
  const t = useTraced({ TRACES_TO_WEBHOOKS: 'true' })

  it("sends the webhook span's traceparent and the producer's tracestate, and a signature that still verifies", async () => {
    const secret = generateSecret()
    await setVariables(t.env.deps.db, t.project, { SIGNING: secret }, 'set')
    let verified = false
    let names: string[] = []
    t.rx.respond((req, res) => {
      names = res.req.rawHeaders
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]))
      new Webhook(secret).verify(req.raw, headers)
      verified = true
      res.end()
    })
    await schemaFor(t.env.deps, t.project, { hook: { url: t.rx.url, signingSecret: '{{SIGNING}}' } })
    await t.enqueue(fromProducer(t.project))
    await t.dispatch(t.project)
    const [hook] = named(await t.otlp.waitFor(allThree), 'webhook')
    expect(t.rx.requests[0]?.headers['traceparent']).toBe(`00-${hook?.traceId}-${hook?.spanId}-01`)
    expect(t.rx.requests[0]?.headers['tracestate']).toBe('vendor=abc')
    // Where upstream puts them: right after User-Agent, before the target's headers and Content-type.
    expect(names.filter((_, i) => i % 2 === 0).slice(2, 5)).toEqual(['User-Agent', 'traceparent', 'tracestate'])
    expect(verified).toBe(true)
  })

  it("keeps a target's own tracestate, in its case and place, as the one line of that name", async () => {
    let lines: string[] = []
    t.rx.respond((_, res) => {
      lines = res.req.rawHeaders
      res.end()
    })
    await schemaFor(t.env.deps, t.project, { hook: { url: t.rx.url, headers: { TraceState: 'mine=1' } } })
    await t.enqueue(fromProducer(t.project))
    await t.dispatch(t.project)
    await t.otlp.waitFor(allThree)
    const names = lines.filter((_, i) => i % 2 === 0)
    expect(names.slice(2, 5)).toEqual(['User-Agent', 'traceparent', 'TraceState'])
    expect(names.filter(n => n.toLowerCase() === 'tracestate')).toHaveLength(1)
    expect(t.rx.requests[0]?.headers['tracestate']).toBe('mine=1')
  })

  it("keeps a target's own traceparent header, and adds no tracestate beside it", async () => {
    await schemaFor(t.env.deps, t.project, {
      hook: { url: t.rx.url, headers: { TraceParent: '00-11111111111111111111111111111111-2222222222222222-01' } },
    })
    await t.enqueue(fromProducer(t.project))
    await t.dispatch(t.project)
    await t.otlp.waitFor(allThree)
    expect(t.rx.requests[0]?.headers['traceparent']).toBe('00-11111111111111111111111111111111-2222222222222222-01')
    expect(t.rx.requests[0]?.headers['tracestate']).toBeUndefined()
  })
})

describe('statement spans (OTEL_ACTIONS_SQL)', () => {
  const t = useTraced({ OTEL_ACTIONS_SQL: 'true' })

  it("adds a span per claim and record statement under the drain's span, named by the statement", async () => {
    await schemaFor(t.env.deps, t.project, { hook: { url: t.rx.url } })
    await t.enqueue({ project: t.project, transactionId: TX, events: [{ trigger: 'to_hook', payload: createPayload(1) }] })
    await t.dispatch(t.project)
    const spans = await t.otlp.waitFor(s => allThree(s) && named(s, 'actions_record_ok').length > 0)
    const [drain] = named(spans, 'actions.dispatch')
    const [claim] = named(spans, 'actions_claim')
    expect(claim).toMatchObject({ traceId: drain?.traceId, kind: CLIENT })
    expect(claim?.attributes).toEqual({ 'db.system.name': 'postgresql' })
    expect(named(spans, 'actions_record_ok')[0]?.traceId).toBe(drain?.traceId)
  })
})
