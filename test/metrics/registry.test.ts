import { createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHandler as createDispatch } from '../../functions/dispatch.js'
import { createHandler as createEnqueue } from '../../functions/enqueue.js'
import { createHandler as createSweeper } from '../../functions/sweeper.js'
import { loadConfig } from '../../lib/config.js'
import { closeDeps, createDeps } from '../../lib/deps.js'
import { createMetrics, createSweeperGauges } from '../../lib/metrics/registry.js'
import { useHarness } from '../helpers/harness.js'
import { createContext, signalEvent } from '../helpers/lambda.js'
import { parseSamples, sumByProject } from '../helpers/prom.js'
import { pushgatewayBinary, requireBinary, scrape } from '../helpers/pushgateway.js'
import { schemaFor } from '../helpers/events.js'
import { createPayload, TX } from '../fixtures/schemas.js'
import { until } from '../helpers/wait.js'

describe('metric series', () => {
  it('creates no series for zero increments and observes delivery durations per project', async () => {
    const m = createMetrics()
    const p = m.forProject('quiet')
    p.succeeded(0)
    p.failed(0)
    p.deliveryAttemptFailed(0)
    p.enqueued(0)
    expect(await m.registry.metrics()).not.toContain('quiet')
    p.deliveryDuration(0.03)
    const text = await m.registry.metrics()
    expect(text).toContain('contember_actions_delivery_duration_seconds_count{contember_project="quiet"} 1')
    expect(text).toContain('contember_actions_delivery_duration_seconds_bucket{le="0.05",contember_project="quiet"} 1')
  })

  it('states a unit in every help text', async () => {
    const all = [...(await createMetrics().registry.getMetricsAsJSON()), ...(await createSweeperGauges().registry.getMetricsAsJSON())]
    const unitless = all.filter(m => !/\b(events|attempts|drains|targets|pushes|spans|seconds)\b/.test(m.help)).map(m => m.name)
    expect(all.length).toBeGreaterThan(10)
    expect(unitless).toEqual([])
  })

  it("keeps the seed's names and help texts", async () => {
    const json = await createMetrics().registry.getMetricsAsJSON()
    const help = Object.fromEntries(json.map(m => [m.name, m.help]))
    expect(help.contember_actions_events_enqueued_total).toBe(
      'Total number of action events written to the queue (inflow), by contember_project.',
    )
    expect(help.contember_actions_events_succeeded_total).toBe(
      'Total number of action events delivered successfully, by contember_project.',
    )
    expect(help.contember_actions_delivery_attempts_failed_total).toBe(
      'Total number of failed webhook delivery attempts (including attempts that will be retried), by contember_project.',
    )
    expect(help.contember_actions_events_failed_total).toBe(
      'Total number of action events that reached a terminal failed state (retries exhausted or unknown target), by contember_project.',
    )
    expect(help.contember_actions_worker_crashed_total).toBe(
      'Total number of drains of a contember_project that dispatch abandoned on an error (count; SQS redelivers the signal, the sweeper re-drives the events). Invocations killed by a Lambda timeout or out of memory cannot count themselves.',
    )
  })
})

describe.skipIf(!requireBinary('prometheus-pushgateway', pushgatewayBinary()))('counters across execution environments', () => {
  const env = useHarness({ pushgateway: true, receiver: true })

  it('sum to what the database says happened', async () => {
    // Every third request fails, so some events retry and some fail for good.
    let call = 0
    env.rx.respond((_, res) => {
      res.statusCode = ++call % 3 === 0 ? 500 : 200
      res.end()
    })
    for (const p of ['m1', 'm2']) await schemaFor(env.deps, p, { t: { url: env.rx.url, maxAttempts: 2, initialRepeatIntervalMs: 1 } })
    // Three simulated Lambda execution environments: own registry, own pool, own grouping key.
    const environments = await Promise.all(
      [1, 2, 3].map(async i => {
        const config = loadConfig({
          ...Object.fromEntries(Object.entries(env.deps.config).map(([k, v]) => [k, String(v ?? '')])),
          METRICS_INSTANCE: `env-${i}`,
        })
        const deps = createDeps(config, { sqs: env.queue.client, log: env.log })
        return { deps, enqueue: createEnqueue(() => deps), dispatch: createDispatch(() => deps) }
      }),
    )
    try {
      for (let round = 0; round < 3; round++) {
        for (const [i, e] of environments.entries()) {
          const project = i % 2 === 0 ? 'm1' : 'm2'
          await e.enqueue(
            { project, transactionId: TX, events: Array.from({ length: 10 }, (_, j) => ({ trigger: 'to_t', payload: createPayload(j) })) },
            createContext(),
          )
          await e.dispatch(signalEvent(project), createContext())
        }
        await new Promise(r => setTimeout(r, 5))
        // Retries become due after 1 ms; any environment may pick them up.
        for (const [i, e] of environments.entries()) await e.dispatch(signalEvent(i % 2 === 0 ? 'm2' : 'm1'), createContext())
      }
    } finally {
      await Promise.all(environments.map(e => closeDeps(e.deps)))
    }
    const samples = parseSamples(await scrape(env.pushgateway.url)).filter(s => s.labels.job === 'contember_actions')
    expect(new Set(samples.map(s => s.labels.instance))).toEqual(new Set(['env-1', 'env-2', 'env-3']))
    const { rows } = await env.db.pool.query(`
      SELECT project,
             count(*)::int AS enqueued,
             (count(*) FILTER (WHERE state = 'succeed'))::int AS succeeded,
             (count(*) FILTER (WHERE state = 'failed'))::int AS failed,
             coalesce(sum(jsonb_array_length(log)), 0)::int AS attempts_failed
      FROM actions_event GROUP BY project ORDER BY project`)
    const db = Object.fromEntries(rows.map(r => [r.project, r]))
    for (const [metric, column] of [
      ['contember_actions_events_enqueued_total', 'enqueued'],
      ['contember_actions_events_succeeded_total', 'succeeded'],
      ['contember_actions_events_failed_total', 'failed'],
      ['contember_actions_delivery_attempts_failed_total', 'attempts_failed'],
    ] as const) {
      const sums = sumByProject(samples, metric)
      for (const p of ['m1', 'm2']) expect(sums[p] ?? 0, `${metric} of ${p}`).toBe(db[p][column])
    }
    expect(db.m1.enqueued + db.m2.enqueued).toBe(90)
    expect(db.m1.failed + db.m2.failed).toBeGreaterThan(0)
  })

  it('does not fail an invocation when the Pushgateway is unreachable, and counts the failed push', async () => {
    const config = loadConfig({
      DATABASE_URL: env.db.url,
      SIGNAL_QUEUE_URL: env.queue.queueUrl,
      PUSHGATEWAY_URL: 'http://127.0.0.1:9',
      PUSHGATEWAY_TIMEOUT_MS: '500',
    })
    const deps = createDeps(config, { sqs: env.queue.client, log: env.log })
    const logs = env.captureLogs()
    try {
      const res = await createEnqueue(() => deps)(
        { project: 'm1', transactionId: TX, events: [{ trigger: 'to_t', payload: createPayload() }] },
        createContext(),
      )
      expect(res.eventIds).toHaveLength(1)
      // Enqueue does not await its push (see the next describe): the refusal is logged a moment later.
      await until('the failed push', () => logs.records().some(r => r.msg === 'Could not push metrics to the Pushgateway'))
    } finally {
      logs.restore()
      await closeDeps(deps)
    }
    expect(logs.records().filter(r => r.msg === 'Could not push metrics to the Pushgateway')).toHaveLength(1)
    expect(logs.lines.join('\n')).not.toContain('127.0.0.1:9')
    const pushFailed = (await deps.metrics.registry.getMetricsAsJSON()).find(m => m.name === 'contember_actions_metrics_push_failed_total')
    expect(pushFailed?.values[0]?.value).toBe(1)
  })
})

describe("enqueue on its caller's request path", () => {
  const env = useHarness()
  let gateway: Server
  const sockets = new Set<Socket>()
  let received = ''
  beforeAll(async () => {
    // A Pushgateway that accepts connections, reads what it is sent and never answers.
    gateway = createServer(socket => {
      sockets.add(socket)
      socket.on('data', chunk => {
        received += chunk.toString('latin1')
      })
      socket.on('close', () => sockets.delete(socket))
    })
    await new Promise<void>(resolve => gateway.listen(0, '127.0.0.1', resolve))
  })
  afterAll(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise(resolve => gateway.close(resolve))
  })

  it('returns before its Pushgateway push could have completed, and the push still goes out', async () => {
    const { port } = gateway.address() as AddressInfo
    // A long push timeout: an awaited push would hold enqueue for all of it.
    const config = loadConfig({
      DATABASE_URL: env.db.url,
      SIGNAL_QUEUE_URL: env.queue.queueUrl,
      PUSHGATEWAY_URL: `http://127.0.0.1:${port}`,
      PUSHGATEWAY_TIMEOUT_MS: '60000',
    })
    const deps = createDeps(config, { sqs: env.queue.client, log: env.log })
    try {
      await schemaFor(env.deps, 'hang', { t: { url: 'http://127.0.0.1:9' } })
      for (let i = 0; i < 2; i++) {
        const res = await createEnqueue(() => deps)(
          { project: 'hang', transactionId: TX, events: [{ trigger: 'to_t', payload: createPayload(i) }] },
          createContext(),
        )
        expect(res.eventIds).toHaveLength(1)
      }
      // Both enqueues have returned; the gateway has answered nothing, so no push has completed,
      // yet one was started: its request arrives, and it is still open.
      await until('the push request', () => received.includes('contember_actions_events_enqueued_total'))
      expect(received).toMatch(/^POST \/metrics\/job@base64\//)
      expect(sockets.size).toBe(1)
      expect(
        (await deps.metrics.registry.getMetricsAsJSON()).find(m => m.name === 'contember_actions_metrics_push_failed_total')?.values[0]
          ?.value ?? 0,
      ).toBe(0)
    } finally {
      await closeDeps(deps)
    }
  })
})
