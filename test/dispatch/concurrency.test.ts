import { LEASE_EXPIRED } from '../../lib/db/claim.js'
import { spawn } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createDeps } from '../../lib/deps.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'
import { until } from '../helpers/wait.js'
import { testEnv, type TestEnv } from '../helpers/runtime.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'
import { enqueue } from '../../lib/enqueue.js'
import { TX } from '../fixtures/schemas.js'

let env: TestEnv
let rx: Receiver
const forever = { remainingMs: () => Number.POSITIVE_INFINITY }

beforeAll(async () => {
  env = await testEnv({ LEASE_MARGIN_MS: '1000' })
  rx = await startReceiver()
})
afterAll(async () => {
  await rx.close()
  await env.close()
})
const deps = () => env.deps


describe('concurrent and crashing dispatchers', () => {
  it('two dispatchers draining the same 2,000 events deliver each exactly once', async () => {
    rx.requests.length = 0
    // Answers take a little while, so both dispatchers are mid-flight together.
    rx.respond((_, res) => { setTimeout(() => res.end(), 2) })
    await schemaFor(deps(), 'race', { a: { url: rx.url + '/a', batchSize: 7 }, b: { url: rx.url + '/b', batchSize: 1 } }, { to_a: { target: 'a' }, to_b: { target: 'b' } })
    const ids = [...await enqueueMany(deps(), 'race', 'to_a', 1500), ...await enqueueMany(deps(), 'race', 'to_b', 500)]
    // A second, independent environment: its own pool, HTTP agent and metrics.
    const other = createDeps(deps().config, { signals: deps().signals, log: env.log })
    try {
      const [r1, r2] = await Promise.all([drainProject(deps(), 'race', forever), drainProject(other, 'race', forever)])
      expect(r1.succeeded + r2.succeeded).toBe(2000)
      expect(r1.succeeded).toBeGreaterThan(0)
      expect(r2.succeeded).toBeGreaterThan(0)
    } finally {
      await other.db.end()
      await other.http.close()
    }
    const delivered = rx.eventIds()
    expect(delivered).toHaveLength(2000)
    expect(new Set(delivered).size).toBe(2000)
    expect([...delivered].sort()).toEqual([...ids].sort())
    for (const r of rx.requests) expect(new Set(r.body.events.map((e: { meta: { target: string } }) => e.meta.target)).size).toBe(1)
    expect([...(await states(deps(), 'race')).values()].every(s => s.state === 'succeed')).toBe(true)
  })

  it('loses nothing when the database drops every connection mid-drain', async () => {
    rx.requests.length = 0
    rx.respond((_, res) => { setTimeout(() => res.end(), 150) })
    await schemaFor(deps(), 'restart', { t: { url: rx.url, timeoutMs: 1000 } })
    const ids = await enqueueMany(deps(), 'restart', 'to_t', 24)
    const drain = drainProject(deps(), 'restart', forever).then(() => 'finished', () => 'crashed')
    await until('deliveries under way', async () => rx.requests.length > 0)
    // What a database restart does to the dispatcher: every connection it holds is gone.
    const admin = createDeps(deps().config, { signals: deps().signals, log: env.log })
    try {
      await admin.db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
    } finally {
      await admin.db.end()
      await admin.http.close()
    }
    expect(['finished', 'crashed']).toContain(await drain)
    // Every event is either delivered and recorded, or waits in the database for its lease to end.
    const after = await states(deps(), 'restart')
    expect(after.size).toBe(24)
    expect([...after.values()].every(s => s.state === 'succeed' || s.state === 'processing' || s.state === 'created')).toBe(true)
    await until('leases to run out', async () => (await deps().db.query(
      `SELECT count(*)::int AS n FROM actions_event WHERE project = 'restart' AND state = 'processing' AND visible_at > now()`)).rows[0].n === 0)
    await drainProject(deps(), 'restart', forever)
    expect([...(await states(deps(), 'restart')).values()].every(s => s.state === 'succeed')).toBe(true)
    expect(new Set(rx.eventIds())).toEqual(new Set(ids))
  })

  it('loses nothing when a dispatcher is killed mid-delivery: the event is delivered after the lease', async () => {
    rx.requests.length = 0
    let hold = true
    rx.respond((_, res) => { if (!hold) res.end() })
    await schemaFor(deps(), 'crash', { t: { url: rx.url, timeoutMs: 2000 } })
    const [id] = await enqueueMany(deps(), 'crash', 'to_t', 1)
    await killMidDelivery('crash')
    const row = (await states(deps(), 'crash')).get(id ?? '')
    expect(row).toMatchObject({ state: 'processing', num_retries: 0 })
    hold = false
    // While the lease runs, nobody else may take the event.
    expect(await drainProject(deps(), 'crash', forever)).toMatchObject({ succeeded: 0, batches: 0 })
    await until('the lease to run out', async () => (await deps().db.query('SELECT visible_at <= now() AS due FROM actions_event WHERE id = $1', [id])).rows[0].due)
    expect(await drainProject(deps(), 'crash', forever)).toMatchObject({ succeeded: 1 })
    expect(rx.eventIds()).toEqual([id, id])
    // The killed attempt may have reached the receiver, so it counts: the second request says so, and so does the log.
    expect(rx.requests[1]?.body).toMatchObject({ events: [{ meta: { numRetries: 1 } }] })
    expect((await states(deps(), 'crash')).get(id ?? '')).toMatchObject({ state: 'succeed', num_retries: 2 })
    const { rows } = await deps().db.query('SELECT log FROM actions_event WHERE id = $1', [id])
    expect(rows[0].log).toEqual([{ ok: false, errorMessage: LEASE_EXPIRED }])
  })

  it('keeps an entity in order across a killed dispatcher: after the lease the key goes on from the lost event', async () => {
    rx.requests.length = 0
    let hold = true
    rx.respond((_, res) => { if (!hold) res.end() })
    await schemaFor(deps(), 'crash-order', { t: { url: rx.url, timeoutMs: 2000 } })
    const updates = [1, 2, 3].map(v => ({ trigger: 'to_t', payload: { operation: 'update', entity: 'Article', id: 'one', values: { v } } }))
    await enqueue(deps(), { project: 'crash-order', transactionId: TX, events: updates })
    await killMidDelivery('crash-order')
    hold = false
    // While the first update's lease runs, the later ones wait behind it.
    expect(await drainProject(deps(), 'crash-order', forever)).toMatchObject({ succeeded: 0, batches: 0 })
    await until('the lease to run out', async () => (await deps().db.query(`SELECT bool_and(visible_at <= now()) AS due FROM actions_event WHERE project = 'crash-order' AND state = 'processing'`)).rows[0].due)
    expect(await drainProject(deps(), 'crash-order', forever)).toMatchObject({ succeeded: 3 })
    expect(rx.requests.map(r => r.body.events.map((e: { values: { v: number } }) => e.values.v))).toEqual([[1], [1], [2], [3]])
  })
})

/** Drains `project` in a child process and kills it (SIGKILL) once its first request has reached the receiver. */
async function killMidDelivery(project: string): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/drain-child.ts'], {
    env: { ...process.env, PROJECT: project, DATABASE_URL: env.db.url, SIGNAL_QUEUE_URL: env.queue.queueUrl, SQS_ENDPOINT: env.queue.endpoint, LEASE_MARGIN_MS: '1000', LOG_LEVEL: 'error' },
    stdio: 'ignore',
  })
  const exited = new Promise(resolve => child.on('exit', resolve))
  await until('the child to start delivering', async () => rx.requests.length === 1)
  child.kill('SIGKILL')
  await exited
}
