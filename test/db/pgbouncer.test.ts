// The engine's core paths through a real PgBouncer in transaction mode with stock settings, where
// every transaction gets a fresh server connection (test/helpers/pgbouncer.ts): with
// DB_PREPARED_STATEMENTS=false they work, and with it on they fail as the issue describes.
import pg from 'pg'
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest'
import { loadConfig } from '../../lib/config.js'
import { createPool, withTransaction } from '../../lib/db/pool.js'
import { closeDeps, createDeps, type Deps } from '../../lib/deps.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { errorCode } from '../../lib/errors.js'
import { sweep } from '../../lib/sweeper/sweep.js'
import { runCli } from '../helpers/cli.js'
import { freshDatabase } from '../helpers/db.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'
import { FOREVER } from '../helpers/harness.js'
import { havePgBouncer, startPgBouncer, type RunningPgBouncer } from '../helpers/pgbouncer.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'
import { logCapture } from '../helpers/runtime.js'
import { startQueue, type TestQueue } from '../helpers/sqs.js'

const ready = havePgBouncer()

describe.runIf(ready)('through PgBouncer in transaction mode', () => {
  let bouncer: RunningPgBouncer
  let db: Awaited<ReturnType<typeof freshDatabase>>
  let queue: TestQueue
  let rx: Receiver
  let deps: Deps
  let through: string
  let n = 0
  let project = ''
  const { log } = logCapture()
  /** The functions' config through PgBouncer; `extra` over the test defaults. */
  const config = (extra: Record<string, string> = {}) =>
    loadConfig({
      DATABASE_URL: through,
      SIGNAL_QUEUE_URL: queue.queueUrl,
      WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
      LOG_LEVEL: 'debug',
      DB_PREPARED_STATEMENTS: 'false',
      BREAKER_FAILURES: '0',
      LEASE_MARGIN_MS: '1000',
      ...extra,
    })

  beforeAll(async () => {
    bouncer = await startPgBouncer(inject('pgAdminUrl'))
    db = await freshDatabase()
    queue = await startQueue()
    rx = await startReceiver()
    through = bouncer.through(db.url)
    deps = createDeps(config(), { sqs: queue.client, log })
  })
  afterAll(async () => {
    await rx?.close()
    if (deps) await closeDeps(deps)
    await queue?.stop()
    await db?.drop()
    await bouncer?.stop()
  })
  beforeEach(async () => {
    project = `b${++n}`
    rx.requests.length = 0
    rx.respond((_, res) => {
      res.end()
    })
    await queue.drain()
  })

  it('hands every transaction a fresh server connection, so no session state can carry over by luck', async () => {
    const pids = new Set<number>()
    for (let i = 0; i < 4; i++) pids.add((await deps.db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? 0)
    expect(pids.size).toBe(4)
  })

  it('enqueues events (signalling the queue) and a drain delivers each once to a real receiver', async () => {
    await schemaFor(deps, project, { t: { url: rx.url + '/hook', batchSize: 3 } })
    const ids = await enqueueMany(deps, project, 'to_t', 7)
    const more = await enqueueMany(deps, project, 'to_t', 2, 7)
    expect(await queue.drain()).toContainEqual({ project })
    const res = await drainProject(deps, project, FOREVER)
    expect(res).toMatchObject({ succeeded: 9, retried: 0, stop: 'idle' })
    expect(rx.eventIds().sort()).toEqual([...ids, ...more].sort())
    expect([...(await states(deps, project)).values()].every(s => s.state === 'succeed' && s.num_retries === 1)).toBe(true)
  })

  it('records a failed attempt, retries it when due, and records the success', async () => {
    rx.respond((_, res) => {
      res.statusCode = 503
      res.end('down')
    })
    await schemaFor(deps, project, { t: { url: rx.url, maxAttempts: 3, initialRepeatIntervalMs: 200 } })
    const [id = ''] = await enqueueMany(deps, project, 'to_t', 1)
    expect(await drainProject(deps, project, FOREVER)).toMatchObject({ succeeded: 0, retried: 1 })
    expect((await states(deps, project)).get(id)).toMatchObject({
      state: 'retrying',
      num_retries: 1,
      log: [expect.objectContaining({ ok: false })],
    })
    rx.respond((_, res) => {
      res.end()
    })
    for (let i = 0; i < 100; i++) {
      if ((await deps.db.query<{ due: boolean }>('SELECT visible_at <= now() AS due FROM actions_event WHERE id = $1', [id])).rows[0]?.due)
        break
      await new Promise(r => setTimeout(r, 20))
    }
    expect(await drainProject(deps, project, FOREVER)).toMatchObject({ succeeded: 1, retried: 0 })
    const row = (await states(deps, project)).get(id)
    expect(row).toMatchObject({ state: 'succeed', num_retries: 2, log: [expect.objectContaining({ ok: false, code: 503 })] })
    expect(rx.requests).toHaveLength(2)
  })

  it('claims each event once when two drains run at the same time', async () => {
    await schemaFor(deps, project, { t: { url: rx.url, batchSize: 5 } })
    const ids = await enqueueMany(deps, project, 'to_t', 40)
    const other = createDeps(config(), { sqs: queue.client, log })
    try {
      const [a, b] = await Promise.all([drainProject(deps, project, FOREVER), drainProject(other, project, FOREVER)])
      expect(a.succeeded + b.succeeded).toBe(40)
    } finally {
      await closeDeps(other)
    }
    expect(rx.eventIds().sort()).toEqual([...ids].sort())
  })

  it('sweeps: re-signals a project whose signal was lost', async () => {
    await schemaFor(deps, project, { t: { url: rx.url } })
    await enqueueMany(deps, project, 'to_t', 3)
    // The enqueue's signal is lost.
    await queue.drain()
    const res = await sweep(deps, { remainingMs: () => 60_000 })
    expect(res.signals[project]).toBe(1)
    expect(await queue.drain()).toContainEqual({ project })
  })

  it('cuts a stuck statement at DB_STATEMENT_TIMEOUT_MS (57014), alone or in a transaction, and leaves nothing running', async () => {
    const bounded = createDeps(config({ DB_STATEMENT_TIMEOUT_MS: '500' }), { sqs: queue.client, log })
    const admin = new pg.Client({ connectionString: db.url })
    await admin.connect()
    try {
      const started = Date.now()
      const alone = await bounded.db.query('SELECT pg_sleep(30)').then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(errorCode(alone)).toBe('57014')
      expect(Date.now() - started).toBeLessThan(5_000)
      const inTx = await withTransaction(bounded.db, c => c.query('SELECT pg_sleep(30)')).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(errorCode(inTx)).toBe('57014')
      expect((await bounded.db.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one).toBe(1)
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(30)%' AND state = 'active'`,
      )
      expect(rows[0]?.n).toBe(0)
    } finally {
      await admin.end()
      await closeDeps(bounded)
    }
  })

  it('runs the CLI through it: migrate, and a schema stored by the functions read back', async () => {
    await schemaFor(deps, project, { t: { url: rx.url } })
    const env = { DATABASE_URL: through, DB_PREPARED_STATEMENTS: 'false' }
    expect(await runCli(env, ['migrate'])).toMatchObject({ code: 0, out: 'nothing to apply' })
    for (let i = 0; i < 2; i++) {
      const got = await runCli(env, ['schema', 'get', project])
      expect(got.code).toBe(0)
      expect(JSON.parse(got.out).schema.targets.t.url).toBe(rx.url)
    }
  })

  describe('with DB_PREPARED_STATEMENTS on (the default), the failures the switch exists for', () => {
    it('refuses every connection of the functions before any statement: statement_timeout in the startup packet', async () => {
      const on = createDeps(config({ DB_PREPARED_STATEMENTS: 'true' }), { sqs: queue.client, log })
      try {
        const e = await on.db.query('SELECT 1').then(
          () => undefined,
          (err: unknown) => err,
        )
        expect(errorCode(e)).toBe('08P01')
        expect(String(e)).toMatch(/unsupported startup parameter: statement_timeout/)
      } finally {
        await closeDeps(on)
      }
    })

    it('loses a named statement prepared in an earlier transaction (26000) once the timeout is not sent', async () => {
      await schemaFor(deps, project, { t: { url: rx.url } })
      const named = createDeps(config({ DB_PREPARED_STATEMENTS: 'true' }), { sqs: queue.client, log, db: createPool(through, 1) })
      try {
        await enqueueMany(named, project, 'to_t', 1)
        const e = await enqueueMany(named, project, 'to_t', 1, 1).then(
          () => undefined,
          (err: unknown) => err,
        )
        expect(errorCode(e)).toBe('26000')
        // The enqueue's first named statement, prepared on the previous transaction's server.
        expect(String(e)).toMatch(/prepared statement "actions_\w+" does not exist/)
      } finally {
        await closeDeps(named)
      }
    })
  })
})
