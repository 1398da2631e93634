import { describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/dispatch.js'
import { loadConfig } from '../../lib/config.js'
import { closeDeps, createDeps } from '../../lib/deps.js'
import { setVariables } from '../../lib/db/variables.js'
import { useHarness } from '../helpers/harness.js'
import { createContext, sqsEvent } from '../helpers/lambda.js'
import { json, type Responder } from '../helpers/receiver.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'

// upstream's rule: dead targets fail events
const env = useHarness({ config: { DISPATCH_TIME_MARGIN_MS: '1000', BREAKER_FAILURES: '0' }, receiver: true })
const handler = createHandler(() => env.deps)
const counter = async (name: string, project: string) => {
  const m = (await env.deps.metrics.registry.getMetricsAsJSON()).find(x => x.name === name)
  return m?.values.find(v => v.labels.contember_project === project)?.value ?? 0
}

describe('the dispatch function', () => {
  it('drains each distinct project of an SQS batch once and reports no failures', async () => {
    await schemaFor(env.deps, 'h1', { t: { url: env.rx.url } })
    await schemaFor(env.deps, 'h2', { t: { url: env.rx.url } })
    await enqueueMany(env.deps, 'h1', 'to_t', 3)
    await enqueueMany(env.deps, 'h2', 'to_t', 2)
    await env.queue.drain()
    const res = await handler(sqsEvent('{"project":"h1"}', '{"project":"h2"}', '{"project":"h1"}'), createContext())
    expect(res).toEqual({ batchItemFailures: [] })
    expect(env.rx.eventIds()).toHaveLength(5)
  })

  it('drains many projects of one batch a few at a time within a small pool', async () => {
    const small = createDeps(
      loadConfig({
        DATABASE_URL: env.db.url,
        SIGNAL_QUEUE_URL: env.queue.queueUrl,
        DB_POOL_MAX: '3',
        WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
      }),
      { sqs: env.queue.client, log: env.log },
    )
    const smallHandler = createHandler(() => small)
    try {
      const projects = Array.from({ length: 8 }, (_, i) => `many${i}`)
      for (const p of projects) {
        await schemaFor(env.deps, p, { t: { url: env.rx.url } })
        await enqueueMany(env.deps, p, 'to_t', 3)
      }
      env.rx.requests.length = 0
      const res = await smallHandler(sqsEvent(...projects.map(project => JSON.stringify({ project }))), createContext())
      expect(res).toEqual({ batchItemFailures: [] })
      expect(env.rx.eventIds()).toHaveLength(24)
    } finally {
      await closeDeps(small)
    }
  })

  it('drops a malformed signal with an error log instead of retrying it forever', async () => {
    const logs = env.captureLogs()
    const res = await handler(sqsEvent('not json', '{"nope":1}'), createContext()).finally(() => logs.restore())
    expect(res).toEqual({ batchItemFailures: [] })
    expect(
      logs
        .records()
        .filter(r => r.msg === 'Dropped a malformed dispatch signal')
        .map(r => r.messageId),
    ).toEqual(['m0', 'm1'])
  })

  it('reports a project whose drain throws as batch item failures, counts the crash, and still drains the others', async () => {
    await schemaFor(env.deps, 'ok', { t: { url: env.rx.url } })
    await enqueueMany(env.deps, 'ok', 'to_t', 2)
    // A runtime whose database pool is closed: every drain of it throws.
    const broken = createDeps(env.deps.config, { signals: env.deps.signals, metrics: env.deps.metrics, http: env.deps.http, log: env.log })
    await broken.db.end()
    const brokenHandler = createHandler(() => broken)
    const logs = env.captureLogs()
    const context = createContext()
    const res = await brokenHandler(sqsEvent('{"project":"bad"}', '{"project":"bad"}'), context).finally(() => logs.restore())
    expect(res).toEqual({ batchItemFailures: [{ itemIdentifier: 'm0' }, { itemIdentifier: 'm1' }] })
    expect(await counter('contember_actions_worker_crashed_total', 'bad')).toBe(1)
    expect(logs.records().some(r => r.level === 'error' && r.project === 'bad')).toBe(true)
    // Each record handed back to SQS is a JSON line of the invocation's logger, with its message id.
    const redelivered = logs.records().filter(r => r.msg === 'Dispatch signal returned to the queue for redelivery')
    expect(redelivered.map(r => [r.level, r.messageId, r.awsRequestId])).toEqual([
      ['warn', 'm0', context.awsRequestId],
      ['warn', 'm1', context.awsRequestId],
    ])
    const mixed = await handler(sqsEvent('{"project":"ok"}'), createContext())
    expect(mixed).toEqual({ batchItemFailures: [] })
    expect(env.rx.eventIds()).toHaveLength(2)
  })

  it('stops when the remaining time is shorter than the next timeout plus the margin, and leaves a delayed signal, never an immediate one', async () => {
    await schemaFor(env.deps, 'slow', { t: { url: env.rx.url, timeoutMs: 2000 } })
    await enqueueMany(env.deps, 'slow', 'to_t', 3)
    await env.queue.drain()
    // 2.5 s left is less than the 2 s timeout plus the 1 s margin: no delivery may start.
    const res = await handler(sqsEvent('{"project":"slow"}'), createContext(2_500))
    expect(res).toEqual({ batchItemFailures: [] })
    expect(env.rx.requests).toHaveLength(0)
    // Nothing moved: an immediate signal would start the same fruitless drain at once, forever.
    expect(await env.queue.drain()).toEqual([])
    expect(env.queue.delayed()).toEqual([{ body: { project: 'slow' }, delaySeconds: 5 }])
    env.queue.server.reset()
    const more = await handler(sqsEvent('{"project":"slow"}'), createContext(60_000))
    expect(more).toEqual({ batchItemFailures: [] })
    expect(env.rx.eventIds()).toHaveLength(3)
    expect(await env.queue.drain()).toEqual([])
  })

  it('leaves one delayed signal for a retry due within 15 minutes', async () => {
    env.rx.respond((_, res) => {
      res.statusCode = 500
      res.end()
    })
    await schemaFor(env.deps, 'later', { t: { url: env.rx.url, initialRepeatIntervalMs: 120_000 } })
    await enqueueMany(env.deps, 'later', 'to_t', 2)
    await env.queue.drain()
    await handler(sqsEvent('{"project":"later"}'), createContext())
    expect(await env.queue.drain()).toEqual([])
    const delayed = env.queue.delayed()
    expect(delayed).toHaveLength(1)
    expect(delayed[0]?.body).toEqual({ project: 'later' })
    expect(delayed[0]?.delaySeconds).toBeGreaterThanOrEqual(118)
    expect(delayed[0]?.delaySeconds).toBeLessThanOrEqual(121)
  })

  it('leaves no signal for a retry more than 15 minutes away (the sweeper re-drives it)', async () => {
    env.rx.respond((_, res) => {
      res.statusCode = 500
      res.end()
    })
    await schemaFor(env.deps, 'far', { t: { url: env.rx.url, initialRepeatIntervalMs: 3_600_000 } })
    await enqueueMany(env.deps, 'far', 'to_t', 1)
    await env.queue.drain()
    env.queue.server.reset()
    await handler(sqsEvent('{"project":"far"}'), createContext())
    expect(await env.queue.drain()).toEqual([])
    expect(env.queue.delayed()).toEqual([])
  })

  it('keeps secrets out of every log line on every failure path', async () => {
    const secret = 'SECRET-7c1e'
    await setVariables(env.deps.db, 'sec', { token: secret, path: `p${secret}` }, 'set')
    const paths: Array<[string, Responder, Record<string, unknown>?]> = [
      [
        'error status',
        (_, res) => {
          res.statusCode = 500
          res.end(`echo ${secret}`)
        },
      ],
      ['timeout', () => {}, { timeoutMs: 200 }],
      ['malformed JSON failures', (_, res) => json(res, 200, { failures: 'x' })],
      ['ids outside the batch', (_, res) => json(res, 200, { failures: [{ eventId: secret }] })],
      ['reported failure', (req, res) => json(res, 200, { failures: [{ eventId: req.body.events[0].meta.eventId }] })],
    ]
    const logs = env.captureLogs()
    try {
      for (const [i, [, respond, extra]] of paths.entries()) {
        env.rx.respond(respond)
        await schemaFor(env.deps, 'sec', {
          t: {
            url: `${env.rx.url}/{{path}}?key=${secret}`,
            headers: { Authorization: `Bearer {{token}}`, 'X-Key': secret },
            maxAttempts: 1,
            ...extra,
          },
        })
        await enqueueMany(env.deps, 'sec', 'to_t', 1)
        await handler(sqsEvent('{"project":"sec"}'), createContext())
        expect(env.rx.requests.length, `path ${i} reached the receiver`).toBeGreaterThan(0)
        env.rx.requests.length = 0
      }
      // Connection refused: nothing listens on port 9.
      await schemaFor(env.deps, 'sec', {
        t: { url: `http://127.0.0.1:9/{{path}}?key=${secret}`, headers: { 'X-Key': secret }, maxAttempts: 1 },
      })
      await enqueueMany(env.deps, 'sec', 'to_t', 1)
      await handler(sqsEvent('{"project":"sec"}'), createContext())
      // Undefined variable.
      await schemaFor(env.deps, 'sec', { t: { url: `${env.rx.url}/{{nope}}?key=${secret}`, headers: { 'X-Key': secret }, maxAttempts: 1 } })
      await enqueueMany(env.deps, 'sec', 'to_t', 1)
      await handler(sqsEvent('{"project":"sec"}'), createContext())
    } finally {
      logs.restore()
    }
    const all = logs.lines.join('\n')
    expect(logs.records().filter(r => r.msg === 'Action event failed permanently, no attempts left')).toHaveLength(7)
    expect(all).not.toContain(secret)
    expect(all).not.toContain(env.rx.url)
    expect(all).not.toContain('127.0.0.1:9')
    const failed = [...(await states(env.deps, 'sec')).values()].map(s => (s.log[0] as { errorMessage: string }).errorMessage).sort()
    expect(failed).toEqual([
      'Connection refused',
      'Internal Server Error',
      'Invalid response: undefined events IDs: [redacted]',
      'Invalid response: value at path /failures: must be array, "x" given',
      'Reported failed by the target',
      'Timeout after 200 ms',
      'Undefined variable nope',
    ])
  })

  it('counts succeeded, failed attempts and terminal failures as the seed does', async () => {
    let call = 0
    env.rx.respond((_, res) => {
      call++
      res.statusCode = call === 1 ? 500 : 200
      res.end()
    })
    await schemaFor(env.deps, 'cnt', { t: { url: env.rx.url, maxAttempts: 2, initialRepeatIntervalMs: 1 } })
    await enqueueMany(env.deps, 'cnt', 'to_t', 1)
    await handler(sqsEvent('{"project":"cnt"}'), createContext())
    await new Promise(r => setTimeout(r, 20))
    await handler(sqsEvent('{"project":"cnt"}'), createContext())
    expect(await counter('contember_actions_events_succeeded_total', 'cnt')).toBe(1)
    expect(await counter('contember_actions_delivery_attempts_failed_total', 'cnt')).toBe(1)
    expect(await counter('contember_actions_events_failed_total', 'cnt')).toBe(0)
  })
})
