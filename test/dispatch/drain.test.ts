import { describe, expect, it } from 'vitest'
import { createDeps } from '../../lib/deps.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { enqueue } from '../../lib/enqueue.js'
import { createPayload, TX } from '../fixtures/schemas.js'
import { countStatements } from '../helpers/statements.js'
import { setVariables } from '../../lib/db/variables.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { json } from '../helpers/receiver.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'

// Upstream's retry rule for dead targets (the breaker has its own tests in test/dispatch/breaker.test.ts).
const env = useHarness({ config: { LEASE_MARGIN_MS: '1000', BREAKER_FAILURES: '0' }, receiver: true })
const counter = async (name: string) => {
  const m = (await env.deps.metrics.registry.getMetricsAsJSON()).find(x => x.name === name)
  return m?.values.find(v => v.labels.contember_project === env.project)?.value ?? 0
}

describe('claim and deliver', () => {
  it('delivers every due event once, in batches of one target ordered by priority then due time', async () => {
    await schemaFor(
      env.deps,
      env.project,
      { a: { url: env.rx.url + '/a', batchSize: 3 }, b: { url: env.rx.url + '/b', batchSize: 2 } },
      {
        to_a: { target: 'a' },
        to_b: { target: 'b' },
        urgent_b: { target: 'b', priority: 5 },
      },
    )
    const a = await enqueueMany(env.deps, env.project, 'to_a', 7)
    const b = await enqueueMany(env.deps, env.project, 'to_b', 3)
    // Another entity than b's (ids 0..2): priority orders across entities, never within one.
    const urgent = (
      await enqueue(env.deps, { project: env.project, transactionId: TX, events: [{ trigger: 'urgent_b', payload: createPayload(99) }] })
    ).eventIds
    const res = await drainProject(env.deps, env.project, FOREVER)
    expect(res).toMatchObject({ succeeded: 11, retried: 0, failedAfterAttempt: 0, failedUnknownTarget: 0, stop: 'idle', signal: 'none' })
    for (const r of env.rx.requests) {
      const targets = new Set(r.body.events.map((e: { meta: { target: string } }) => e.meta.target))
      expect(targets.size).toBe(1)
      expect(r.path).toBe('/' + [...targets][0])
      expect(r.body.events.length).toBeLessThanOrEqual(r.path === '/a' ? 3 : 2)
    }
    expect(env.rx.eventIds().sort()).toEqual([...a, ...b, ...urgent].sort())
    // The urgent event leads the first batch of its target, ahead of older events.
    const firstB = env.rx.requests.find(r => r.path === '/b')
    expect(firstB?.body.events[0].meta.eventId).toBe(urgent[0])
    expect([...(await states(env.deps, env.project)).values()].every(s => s.state === 'succeed' && s.num_retries === 1)).toBe(true)
    expect(await counter('contember_actions_events_succeeded_total')).toBe(11)
  })

  it('sends the body template with events at payloadPath, substituted URL and headers, and the standard headers', async () => {
    await setVariables(env.deps.db, env.project, { path: 'hooks', token: 's3cret' }, 'set')
    await schemaFor(env.deps, env.project, {
      t: {
        url: env.rx.url + '/{{path}}/in',
        headers: { Authorization: 'Bearer {{token}}', 'X-Static': 'yes' },
        body: { source: 'cms', data: { keep: true } },
        payloadPath: ['data', 'items'],
        batchSize: 10,
      },
    })
    const [id] = await enqueueMany(env.deps, env.project, 'to_t', 1)
    await drainProject(env.deps, env.project, FOREVER)
    const req = env.rx.requests[0]
    expect(req?.path).toBe('/hooks/in')
    expect(req?.method).toBe('POST')
    expect(req?.headers).toMatchObject({
      authorization: 'Bearer s3cret',
      'x-static': 'yes',
      'content-type': 'application/json',
      'user-agent': 'Contember Actions',
    })
    expect(req?.body.source).toBe('cms')
    expect(req?.body.data.keep).toBe(true)
    expect(req?.body.data.items.events).toHaveLength(1)
    const ev = req?.body.data.items.events[0]
    expect(ev).toMatchObject({ operation: 'create', entity: 'Article', id: 0, values: { title: 'Article 0' } })
    expect(ev.meta).toMatchObject({ eventId: id, transactionId: expect.any(String), numRetries: 0, trigger: 'to_t', target: 't' })
    expect(Object.keys(ev.meta).sort()).toEqual([
      'createdAt',
      'eventId',
      'identityId',
      'ipAddress',
      'lastStateChange',
      'numRetries',
      'target',
      'transactionId',
      'trigger',
      'userAgent',
    ])
  })

  it('fails the attempt with "Undefined variable NAME" when a template names a missing variable', async () => {
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url + '/{{missing}}', maxAttempts: 3 } })
    await enqueueMany(env.deps, env.project, 'to_t', 1)
    const res = await drainProject(env.deps, env.project, FOREVER)
    expect(res.retried).toBe(1)
    const [row] = [...(await states(env.deps, env.project)).values()]
    expect(row?.state).toBe('retrying')
    expect(row?.log).toEqual([{ ok: false, errorMessage: 'Undefined variable missing', durationMs: expect.any(Number) }])
    expect(env.rx.requests).toHaveLength(0)
  })

  it('fails an event whose target left the schema without a request, counting the attempt as upstream does, and moves on', async () => {
    await schemaFor(env.deps, env.project, { gone: { url: env.rx.url }, kept: { url: env.rx.url + '/kept' } })
    const lost = await enqueueMany(env.deps, env.project, 'to_gone', 2)
    const kept = await enqueueMany(env.deps, env.project, 'to_kept', 1)
    await schemaFor(env.deps, env.project, { kept: { url: env.rx.url + '/kept' } })
    const logs = env.captureLogs()
    const res = await drainProject(env.deps, env.project, FOREVER).finally(() => logs.restore())
    expect(res).toMatchObject({ succeeded: 1, failedUnknownTarget: 2 })
    expect(env.rx.eventIds()).toEqual(kept)
    const rows = await env.deps.db.query('SELECT id, state, resolved_at, log, num_retries FROM actions_event WHERE id = ANY($1)', [lost])
    for (const r of rows.rows) {
      expect(r.state).toBe('failed')
      expect(r.resolved_at).not.toBeNull()
      expect(r.num_retries).toBe(1)
      // Upstream's entry exactly: no durationMs, since no request was made.
      expect(r.log).toEqual([{ ok: false, errorMessage: 'Event target gone not found, stopping.' }])
    }
    const errors = logs.records().filter(r => r.level === 'error')
    expect(errors.map(e => e.eventId).sort()).toEqual([...lost].sort())
    expect(errors[0]).toMatchObject({ target: 'gone', msg: 'Action event failed permanently, its target is not in the schema' })
    expect(await counter('contember_actions_events_failed_total')).toBe(2)
    expect(await counter('contember_actions_delivery_attempts_failed_total')).toBe(0)
  })

  it('makes exactly maxAttempts attempts, spaced by the doubling backoff on the database clock', async () => {
    env.rx.respond((_, res) => {
      res.statusCode = 503
      res.end('down')
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 4, initialRepeatIntervalMs: 200 } })
    const [id] = await enqueueMany(env.deps, env.project, 'to_t', 1)
    const spacing: number[] = []
    let totals = { retried: 0, failed: 0 }
    for (let attempt = 1; attempt <= 4; attempt++) {
      // Wait until the database says the event is due, then drain once.
      for (let i = 0; i < 100; i++) {
        const { rows } = await env.deps.db.query('SELECT visible_at <= now() AS due FROM actions_event WHERE id = $1', [id])
        if (rows[0].due) break
        await new Promise(r => setTimeout(r, 20))
      }
      const before = (await env.deps.db.query('SELECT now() AS t')).rows[0].t
      const res = await drainProject(env.deps, env.project, FOREVER)
      totals = { retried: totals.retried + res.retried, failed: totals.failed + res.failedAfterAttempt }
      const { rows } = await env.deps.db.query(
        `SELECT state, num_retries, extract(epoch FROM visible_at - last_state_change) * 1000 AS wait_ms, last_state_change >= $2 AS fresh FROM actions_event WHERE id = $1`,
        [id, before],
      )
      expect(rows[0].num_retries).toBe(attempt)
      expect(rows[0].fresh).toBe(true)
      if (attempt < 4) {
        expect(rows[0].state).toBe('retrying')
        spacing.push(Math.round(Number(rows[0].wait_ms)))
      } else {
        expect(rows[0].state).toBe('failed')
      }
    }
    expect(spacing).toEqual([200, 400, 800])
    expect(totals).toEqual({ retried: 3, failed: 1 })
    expect(env.rx.requests).toHaveLength(4)
    expect(await drainProject(env.deps, env.project, FOREVER)).toMatchObject({ succeeded: 0, retried: 0, failedAfterAttempt: 0 })
    expect(env.rx.requests).toHaveLength(4)
    const row = (await states(env.deps, env.project)).get(id ?? '')
    expect(row?.log).toHaveLength(4)
    expect(row?.log[0]).toMatchObject({ ok: false, code: 503, errorMessage: 'Service Unavailable', response: 'down' })
    expect(await counter('contember_actions_delivery_attempts_failed_total')).toBe(4)
    expect(await counter('contember_actions_events_failed_total')).toBe(1)
  })

  it('cuts off a receiver that hangs at timeoutMs', async () => {
    env.rx.respond(() => {
      /* never answers */
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, timeoutMs: 300 } })
    await enqueueMany(env.deps, env.project, 'to_t', 1)
    const started = Date.now()
    const res = await drainProject(env.deps, env.project, FOREVER)
    const took = Date.now() - started
    expect(res.retried).toBe(1)
    expect(took).toBeGreaterThanOrEqual(290)
    expect(took).toBeLessThan(5_000)
    const [row] = [...(await states(env.deps, env.project)).values()]
    expect(row?.log[0]).toMatchObject({ ok: false, errorMessage: 'Timeout after 300 ms' })
  })

  it('does not follow redirects', async () => {
    env.rx.respond((req, res) => {
      if (req.path === '/moved') {
        res.end()
        return
      }
      res.writeHead(307, { location: env.rx.url + '/moved' })
      res.end()
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url + '/start' } })
    await enqueueMany(env.deps, env.project, 'to_t', 1)
    const res = await drainProject(env.deps, env.project, FOREVER)
    expect(res.retried).toBe(1)
    expect(env.rx.requests.map(r => r.path)).toEqual(['/start'])
  })

  it('reads a bounded part of a 10 MB response and stores a bounded part in the log', async () => {
    // A Buffer lives outside the JS heap, so the heap measures what the dispatcher itself holds.
    const big = Buffer.alloc(10 * 1024 * 1024, 'x')
    env.rx.respond((_, res) => {
      res.statusCode = 500
      res.end(big)
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url } })
    await enqueueMany(env.deps, env.project, 'to_t', 1)
    const logs = env.captureLogs()
    const heapBefore = process.memoryUsage().heapUsed
    await drainProject(env.deps, env.project, FOREVER).finally(() => logs.restore())
    const heapGrowth = process.memoryUsage().heapUsed - heapBefore
    const [row] = [...(await states(env.deps, env.project)).values()]
    const entry = row?.log[0] as { response: string }
    expect(entry.response.length).toBeLessThanOrEqual(4096)
    expect(Math.max(...logs.lines.map(l => l.length))).toBeLessThan(4096)
    // Reading the whole body into a string would add 10+ MB of heap; the read stops at 1 MiB.
    expect(heapGrowth).toBeLessThan(8 * 1024 * 1024)
  })

  it('hands claims it has no time left to deliver back, due now, and leaves a continuation signal', async () => {
    env.rx.respond((_, res) => {
      setTimeout(() => res.end(), 60)
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, timeoutMs: 1000 } })
    const ids = await enqueueMany(env.deps, env.project, 'to_t', 40)
    await env.queue.drain() // enqueue's own signal
    // Enough time for the first claims and a round or two of deliveries, then less than timeout + margin.
    const deadline = Date.now() + env.deps.config.DISPATCH_TIME_MARGIN_MS + 1000 + 150
    const res = await drainProject(env.deps, env.project, { remainingMs: () => deadline - Date.now() })
    expect(res.stop).toBe('time')
    expect(res.signal).toBe('continue')
    expect(res.succeeded).toBeGreaterThan(0)
    expect(res.succeeded).toBeLessThan(40)
    const { rows } = await env.deps.db.query(
      `SELECT state, visible_at <= now() AS due, num_retries FROM actions_event WHERE id = ANY($1)`,
      [ids],
    )
    const waiting = rows.filter(r => r.state !== 'succeed')
    expect(waiting.length).toBe(40 - res.succeeded)
    // Nothing stays leased: the continuation can take every remaining event at once, none charged an attempt.
    expect(waiting.every(r => r.due && r.num_retries === 0)).toBe(true)
    // Earlier tests' retries leave delayed signals of their own projects, which may become visible by now.
    expect((await env.queue.drain()).filter(s => JSON.stringify(s).includes(`"${env.project}"`))).toEqual([{ project: env.project }])
  })

  it('keeps every worker for events that arrive while a delivery is under way', async () => {
    let inFlight = 0
    let maxInFlight = 0
    env.rx.respond((_, res) => {
      maxInFlight = Math.max(maxInFlight, ++inFlight)
      setTimeout(() => {
        inFlight--
        res.end()
      }, 80)
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url } })
    await enqueueMany(env.deps, env.project, 'to_t', 1)
    const drain = drainProject(env.deps, env.project, FOREVER)
    // The first delivery is in flight; idle workers must not have given up.
    await new Promise(r => setTimeout(r, 30))
    await enqueueMany(env.deps, env.project, 'to_t', 16)
    expect((await drain).succeeded).toBe(17)
    expect(maxInFlight).toBeGreaterThanOrEqual(4)
  })

  it('claims twice for a few events, however their deliveries end: once to take them, once when all are done', async () => {
    // Answers at different times: each finished delivery used to start a claim of its own.
    let i = 0
    env.rx.respond((_, res) => {
      setTimeout(() => res.end(), 10 * (i++ % 5))
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url } })
    await enqueueMany(env.deps, env.project, 'to_t', 5)
    const counted = countStatements(env.deps.db)
    const res = await drainProject(env.deps, env.project, FOREVER)
    expect(res.succeeded).toBe(5)
    expect(env.rx.requests).toHaveLength(5)
    expect(counted.named('actions_claim')).toBe(2)
  })

  it('claims again as soon as a finished delivery frees bytes, when the byte budget cut the claim', async () => {
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url } })
    // Six events of one payload size (ids 0..5); the budget holds two of them, not three.
    await enqueueMany(env.deps, env.project, 'to_t', 6)
    const { rows } = await env.deps.db.query(
      `SELECT min(octet_length(payload::text)) AS lo, max(octet_length(payload::text)) AS hi FROM actions_event WHERE project = $1`,
      [env.project],
    )
    expect(rows[0].lo).toBe(rows[0].hi)
    const budgeted = createDeps(
      { ...env.deps.config, DISPATCH_CONCURRENCY: 2, DISPATCH_MAX_CLAIMED_BYTES: 3 * rows[0].hi - 1 },
      { signals: env.deps.signals, log: env.log },
    )
    // The first request is answered only once all six have arrived (or after 2 s): the other five must
    // get through the second worker meanwhile, each claimed when the one before it freed its bytes.
    let seenWhenFirstAnswered = 0
    env.rx.respond(async (_, res) => {
      if (env.rx.requests.length === 1) {
        const until = Date.now() + 2_000
        while (env.rx.requests.length < 6 && Date.now() < until) await new Promise(r => setTimeout(r, 5))
        seenWhenFirstAnswered = env.rx.requests.length
      }
      res.end()
    })
    try {
      expect((await drainProject(budgeted, env.project, FOREVER)).succeeded).toBe(6)
    } finally {
      await budgeted.db.end()
      await budgeted.http.close()
    }
    expect(seenWhenFirstAnswered).toBe(6)
  })

  it('records all outcomes of many batches with few statements', async () => {
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, batchSize: 50 } })
    await enqueueMany(env.deps, env.project, 'to_t', 1000)
    const counted = countStatements(env.deps.db)
    const res = await drainProject(env.deps, env.project, FOREVER)
    expect(res.succeeded).toBe(1000)
    // 20 batches: claims and records of several batches share statements; never one per event.
    expect(counted.count()).toBeLessThanOrEqual(50)
  })
})
