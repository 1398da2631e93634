import { LEASE_EXPIRED } from '../../lib/db/claim.js'
import { spawn } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { createDeps } from '../../lib/deps.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { until } from '../helpers/wait.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'
import { enqueue } from '../../lib/enqueue.js'
import { TX } from '../fixtures/schemas.js'

const env = useHarness({ config: { LEASE_MARGIN_MS: '1000' }, receiver: true })

describe('concurrent and crashing dispatchers', () => {
  it('two dispatchers draining the same 2,000 events deliver each exactly once', async () => {
    env.rx.requests.length = 0
    // Answers take a little while, so both dispatchers are mid-flight together.
    env.rx.respond((_, res) => {
      setTimeout(() => res.end(), 2)
    })
    await schemaFor(
      env.deps,
      'race',
      { a: { url: env.rx.url + '/a', batchSize: 7 }, b: { url: env.rx.url + '/b', batchSize: 1 } },
      { to_a: { target: 'a' }, to_b: { target: 'b' } },
    )
    const ids = [...(await enqueueMany(env.deps, 'race', 'to_a', 1500)), ...(await enqueueMany(env.deps, 'race', 'to_b', 500))]
    // A second, independent environment: its own pool, HTTP agent and metrics.
    const other = createDeps(env.deps.config, { signals: env.deps.signals, log: env.log })
    try {
      const [r1, r2] = await Promise.all([drainProject(env.deps, 'race', FOREVER), drainProject(other, 'race', FOREVER)])
      expect(r1.succeeded + r2.succeeded).toBe(2000)
      expect(r1.succeeded).toBeGreaterThan(0)
      expect(r2.succeeded).toBeGreaterThan(0)
    } finally {
      await other.db.end()
      await other.http.close()
    }
    const delivered = env.rx.eventIds()
    expect(delivered).toHaveLength(2000)
    expect(new Set(delivered).size).toBe(2000)
    expect([...delivered].sort()).toEqual([...ids].sort())
    for (const r of env.rx.requests) expect(new Set(r.body.events.map((e: { meta: { target: string } }) => e.meta.target)).size).toBe(1)
    expect([...(await states(env.deps, 'race')).values()].every(s => s.state === 'succeed')).toBe(true)
  })

  it('loses nothing when the database drops every connection mid-drain', async () => {
    env.rx.requests.length = 0
    env.rx.respond((_, res) => {
      setTimeout(() => res.end(), 150)
    })
    await schemaFor(env.deps, 'restart', { t: { url: env.rx.url, timeoutMs: 1000 } })
    const ids = await enqueueMany(env.deps, 'restart', 'to_t', 24)
    const drain = drainProject(env.deps, 'restart', FOREVER).then(
      () => 'finished',
      () => 'crashed',
    )
    await until('deliveries under way', async () => env.rx.requests.length > 0)
    // What a database restart does to the dispatcher: every connection it holds is gone.
    const admin = createDeps(env.deps.config, { signals: env.deps.signals, log: env.log })
    try {
      await admin.db.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
      )
    } finally {
      await admin.db.end()
      await admin.http.close()
    }
    expect(['finished', 'crashed']).toContain(await drain)
    // Every event is either delivered and recorded, or waits in the database for its lease to end.
    const after = await states(env.deps, 'restart')
    expect(after.size).toBe(24)
    expect([...after.values()].every(s => s.state === 'succeed' || s.state === 'processing' || s.state === 'created')).toBe(true)
    await until(
      'leases to run out',
      async () =>
        (
          await env.deps.db.query(
            `SELECT count(*)::int AS n FROM actions_event WHERE project = 'restart' AND state = 'processing' AND lease_until > now()`,
          )
        ).rows[0].n === 0,
    )
    await drainProject(env.deps, 'restart', FOREVER)
    expect([...(await states(env.deps, 'restart')).values()].every(s => s.state === 'succeed')).toBe(true)
    expect(new Set(env.rx.eventIds())).toEqual(new Set(ids))
  })

  it('loses nothing when a dispatcher is killed mid-delivery: the event is delivered after the lease', async () => {
    env.rx.requests.length = 0
    let hold = true
    env.rx.respond((_, res) => {
      if (!hold) res.end()
    })
    await schemaFor(env.deps, 'crash', { t: { url: env.rx.url, timeoutMs: 2000 } })
    const [id] = await enqueueMany(env.deps, 'crash', 'to_t', 1)
    await killMidDelivery('crash')
    const row = (await states(env.deps, 'crash')).get(id ?? '')
    expect(row).toMatchObject({ state: 'processing', num_retries: 0 })
    hold = false
    // While the lease runs, nobody else may take the event.
    expect(await drainProject(env.deps, 'crash', FOREVER)).toMatchObject({ succeeded: 0, batches: 0 })
    await until(
      'the lease to run out',
      async () => (await env.deps.db.query('SELECT lease_until <= now() AS due FROM actions_event WHERE id = $1', [id])).rows[0].due,
    )
    expect(await drainProject(env.deps, 'crash', FOREVER)).toMatchObject({ succeeded: 1 })
    expect(env.rx.eventIds()).toEqual([id, id])
    // The killed attempt may have reached the receiver, so it counts: the second request says so, and so does the log.
    expect(env.rx.requests[1]?.body).toMatchObject({ events: [{ meta: { numRetries: 1 } }] })
    expect((await states(env.deps, 'crash')).get(id ?? '')).toMatchObject({ state: 'succeed', num_retries: 2 })
    const { rows } = await env.deps.db.query('SELECT log FROM actions_event WHERE id = $1', [id])
    expect(rows[0].log).toEqual([{ ok: false, errorMessage: LEASE_EXPIRED }])
  })

  it('keeps an entity in order across a killed dispatcher: after the lease the key goes on from the lost event', async () => {
    env.rx.requests.length = 0
    let hold = true
    env.rx.respond((_, res) => {
      if (!hold) res.end()
    })
    await schemaFor(env.deps, 'crash-order', { t: { url: env.rx.url, timeoutMs: 2000 } })
    const updates = [1, 2, 3].map(v => ({ trigger: 'to_t', payload: { operation: 'update', entity: 'Article', id: 'one', values: { v } } }))
    await enqueue(env.deps, { project: 'crash-order', transactionId: TX, events: updates })
    await killMidDelivery('crash-order')
    hold = false
    // While the first update's lease runs, the later ones wait behind it.
    expect(await drainProject(env.deps, 'crash-order', FOREVER)).toMatchObject({ succeeded: 0, batches: 0 })
    await until(
      'the lease to run out',
      async () =>
        (
          await env.deps.db.query(
            `SELECT bool_and(lease_until <= now()) AS due FROM actions_event WHERE project = 'crash-order' AND state = 'processing'`,
          )
        ).rows[0].due,
    )
    expect(await drainProject(env.deps, 'crash-order', FOREVER)).toMatchObject({ succeeded: 3 })
    expect(env.rx.requests.map(r => r.body.events.map((e: { values: { v: number } }) => e.values.v))).toEqual([[1], [1], [2], [3]])
  })
})

/** Drains `project` in a child process and kills it (SIGKILL) once its first request has reached the receiver. */
async function killMidDelivery(project: string): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/drain-child.ts'], {
    env: {
      ...process.env,
      PROJECT: project,
      DATABASE_URL: env.db.url,
      SIGNAL_QUEUE_URL: env.queue.queueUrl,
      SQS_ENDPOINT: env.queue.endpoint,
      LEASE_MARGIN_MS: '1000',
      LOG_LEVEL: 'error',
    },
    stdio: 'ignore',
  })
  const exited = new Promise(resolve => child.on('exit', resolve))
  await until('the child to start delivering', async () => env.rx.requests.length === 1)
  child.kill('SIGKILL')
  await exited
}
