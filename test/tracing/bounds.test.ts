// Tracing's edges: off means nothing is built or written; a collector that never answers
// holds no invocation and loses only spans, counted; no secret ever reaches an exported span.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHandler as createDispatch } from '../../functions/dispatch.js'
import { createHandler as createEnqueue } from '../../functions/enqueue.js'
import { setVariables } from '../../lib/db/variables.js'
import { generateSecret } from '../../lib/delivery/signing.js'
import { noTracing } from '../../lib/tracing/tracing.js'
import { tracesUrl } from '../../lib/tracing/config.js'
import { loadConfig } from '../../lib/config.js'
import { schemaFor } from '../helpers/events.js'
import { createContext, signalEvent } from '../helpers/lambda.js'
import { startSilentServer } from '../helpers/net.js'
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'
import { testEnv, type TestEnv } from '../helpers/runtime.js'
import { createPayload, TX } from '../fixtures/schemas.js'

const PRODUCER = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
const base = { DATABASE_URL: 'postgres://x@127.0.0.1/x', SIGNAL_QUEUE_URL: 'http://127.0.0.1:9/q' }

describe('tracing configuration', () => {
  it('is off unless an OTLP endpoint is set, and OTEL_SDK_DISABLED wins over one', () => {
    expect(tracesUrl(loadConfig(base))).toBeUndefined()
    expect(tracesUrl(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318/' }))).toBe(
      'http://127.0.0.1:4318/v1/traces',
    )
    const both = { ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:4318/traces' }
    expect(tracesUrl(loadConfig(both))).toBe('http://b:4318/traces')
    expect(tracesUrl(loadConfig({ ...both, OTEL_SDK_DISABLED: 'true' }))).toBeUndefined()
  })

  it('refuses an unknown sampler and a ratio outside 0..1, naming the key and never the value', () => {
    expect(() => loadConfig({ ...base, OTEL_TRACES_SAMPLER: 'xray' })).toThrow(/OTEL_TRACES_SAMPLER: expected one of always_on/)
    expect(() => loadConfig({ ...base, OTEL_TRACES_SAMPLER_ARG: '1.5' })).toThrow(/OTEL_TRACES_SAMPLER_ARG: expected a ratio from 0 to 1/)
    expect(() => loadConfig({ ...base, TRACES_ACCEPT_INCOMING: 'some' })).toThrow(/TRACES_ACCEPT_INCOMING: expected all or none/)
  })
})

/** A fresh environment, a receiver, and the two Lambda handlers over them. */
function useEnv(config: () => Record<string, string>) {
  const parts: { env?: TestEnv; rx?: Receiver } = {}
  beforeAll(async () => {
    parts.rx = await startReceiver()
    parts.env = await testEnv(config())
  })
  afterAll(async () => {
    await parts.env?.close()
    await parts.rx?.close()
  })
  const env = () => parts.env ?? (undefined as never)
  return {
    env,
    rx: () => parts.rx ?? (undefined as never),
    enqueue: (body: Record<string, unknown>) => createEnqueue(() => env().deps)(body, createContext()),
    dispatch: (project: string) => createDispatch(() => env().deps)(signalEvent(project), createContext()),
  }
}

describe('tracing off (the default)', () => {
  const t = useEnv(() => ({}))

  it('builds no provider or exporter, stores no trace context and writes no trace ids', async () => {
    expect(t.env().deps.tracing).toBe(noTracing)
    await schemaFor(t.env().deps, 'off', { hook: { url: t.rx().url } })
    const logs = t.env().captureLogs()
    t.rx().respond((_, res) => {
      res.statusCode = 500
      res.end()
    })
    await t.enqueue({
      project: 'off',
      transactionId: TX,
      traceparent: PRODUCER,
      events: [{ trigger: 'to_hook', payload: createPayload(1) }],
    })
    await t.dispatch('off')
    logs.restore()
    const { rows } = await t.env().db.pool.query("SELECT traceparent, tracestate, num_retries FROM actions_event WHERE project = 'off'")
    expect(rows).toEqual([{ traceparent: null, tracestate: null, num_retries: 1 }])
    expect(logs.records().length).toBeGreaterThan(0)
    expect(logs.records().some(r => 'trace_id' in r || 'span_id' in r)).toBe(false)
    expect(t.rx().requests[0]?.headers['traceparent']).toBeUndefined()
  })
})

describe('a collector that never answers', () => {
  let silent: Awaited<ReturnType<typeof startSilentServer>> | undefined
  beforeAll(async () => {
    silent = await startSilentServer()
  })
  afterAll(() => silent?.close())
  const BOUND_MS = 300
  const t = useEnv(() => ({ OTEL_EXPORTER_OTLP_ENDPOINT: silent?.url ?? '', TRACES_FLUSH_TIMEOUT_MS: String(BOUND_MS) }))

  it('holds no invocation past its flush bound, delivers everything, and counts the spans it lost', async () => {
    await schemaFor(t.env().deps, 'dead', { hook: { url: t.rx().url } })
    const timed = async (fn: () => Promise<unknown>) => {
      const started = performance.now()
      await fn()
      return performance.now() - started
    }
    const logs = t.env().captureLogs()
    const enqueued = await timed(() =>
      t.enqueue({ project: 'dead', transactionId: TX, events: [1, 2, 3].map(i => ({ trigger: 'to_hook', payload: createPayload(i) })) }),
    )
    const drained = await timed(() => t.dispatch('dead'))
    // Every wait on the collector is bounded by TRACES_FLUSH_TIMEOUT_MS; without a bound an export
    // to a silent server waits for the OTLP exporter's 10 s default.
    expect(enqueued).toBeLessThan(BOUND_MS + 2_000)
    expect(drained).toBeLessThan(BOUND_MS + 2_000)
    expect(silent?.accepted()).toBeGreaterThan(0)
    const { rows } = await t
      .env()
      .db.pool.query("SELECT state, count(*)::int AS n FROM actions_event WHERE project = 'dead' GROUP BY state")
    expect(rows).toEqual([{ state: 'succeed', n: 3 }])
    expect(t.rx().eventIds()).toHaveLength(3)

    // The exports have timed out by now: the next invocation's flush counts what they carried.
    await new Promise(r => setTimeout(r, BOUND_MS * 2))
    expect(await timed(() => t.dispatch('dead'))).toBeLessThan(BOUND_MS + 2_000)
    logs.restore()
    const dropped = (await t.env().deps.metrics.traceSpansDropped.get()).values[0]?.value ?? 0
    // actions.enqueue, actions.dispatch, the webhook span of each batch, and the second drain's span
    expect(dropped).toBeGreaterThanOrEqual(3)
    expect(logs.records().find(r => r['msg'] === 'Trace spans were dropped: the collector did not take them')).toBeDefined()
  })
})

describe('secrets never reach a span', () => {
  let otlp: OtlpReceiver | undefined
  beforeAll(async () => {
    otlp = await startOtlpReceiver()
  })
  afterAll(() => otlp?.close())
  const t = useEnv(() => ({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp?.url ?? '', TRACES_TO_WEBHOOKS: 'true', OTEL_ACTIONS_SQL: 'true' }))

  it('exports no variable value, target URL or header, whatever the delivery comes to', async () => {
    const canary = { PATH: 'canary-path-5c1e', TOKEN: 'canary-token-9b7d', SIGNING: generateSecret() }
    await setVariables(t.env().deps.db, 'secret', canary, 'set')
    const headers = { 'x-canary-header': 'Bearer {{TOKEN}}' }
    await schemaFor(t.env().deps, 'secret', {
      ok: { url: `${t.rx().url}/{{PATH}}?k={{TOKEN}}`, headers, signingSecret: '{{SIGNING}}' },
      failing: { url: `${t.rx().url}/fail/{{PATH}}`, headers, maxAttempts: 1 },
      unaddressable: { url: `${t.rx().url}/{{MISSING}}`, headers },
    })
    t.rx().respond((req, res) => {
      res.statusCode = req.path.startsWith('/fail') ? 500 : 200
      res.end(`echo ${req.path} ${String(req.headers['x-canary-header'])}`)
    })
    await t.enqueue({
      project: 'secret',
      transactionId: TX,
      traceparent: PRODUCER,
      events: ['to_ok', 'to_failing', 'to_unaddressable'].map((trigger, i) => ({ trigger, payload: createPayload(i) })),
    })
    await t.dispatch('secret')
    const spans = await otlp!.waitFor(s => s.filter(x => x.name === 'webhook').length === 3)
    expect(t.rx().requests).toHaveLength(2)
    const exported = otlp!.bodies.join('\n')
    const port = new URL(t.rx().url).port
    for (const secret of [...Object.values(canary), 'x-canary-header', 'Bearer', `127.0.0.1:${port}`, '/fail', 'Article 0'])
      expect(exported, `exported spans hold ${secret.slice(0, 12)}`).not.toContain(secret)
    // What the spans do say: the target names.
    expect(spans.filter(s => s.name === 'webhook').map(s => s.attributes['contember.actions.target'])).toEqual(
      expect.arrayContaining(['ok', 'failing', 'unaddressable']),
    )
  })
})
