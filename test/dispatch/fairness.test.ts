import { describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/dispatch.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { createContext } from '../helpers/lambda.js'
import { useHarness } from '../helpers/harness.js'
import { startReceiver } from '../helpers/receiver.js'
import { testEnv } from '../helpers/runtime.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { TX } from '../fixtures/schemas.js'

// Fair sharing: a dead target cannot starve a healthy one of the same project, and
// a deep backlog cannot keep the other projects of an invocation waiting.

const env = useHarness({
  // One project at a time (a pool of 3 serves one drain), so only the slice can let the others in.
  config: { DB_POOL_MAX: '3', DISPATCH_PROJECT_SLICE_MS: '1000', DISPATCH_TIME_MARGIN_MS: '1000' },
  // `dead` never answers: every request to it ends at the target's timeout.
  receivers: { healthy: true, dead: () => {} },
})
const healthy = () => env.receiver('healthy')
const dead = () => env.receiver('dead')

/** Inserts `n` due events of one target in one statement. */
async function insertDue(project: string, target: string, n: number): Promise<void> {
  await env.deps.db.query(
    `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, visible_at)
     SELECT gen_random_uuid(), $1, $2, 1, $3, 'to_' || $3, jsonb_build_object('n', i), now() - interval '1 minute'
     FROM generate_series(1, $4::int) AS i`,
    [project, TX, target, n],
  )
}

describe('fair sharing', () => {
  it("delivers a healthy target's events before the first timeout of a dead target holding 1,000 older events", async () => {
    const project = 'deadbeside'
    await schemaFor(env.deps, project, { dead: { url: dead().url, timeoutMs: 2_000 }, ok: { url: healthy().url } })
    await insertDue(project, 'dead', 1_000)
    const ids = await enqueueMany(env.deps, project, 'to_ok', 10)
    const res = await drainProject(env.deps, project, { remainingMs: () => Number.POSITIVE_INFINITY, sliceMs: 1_000 })

    expect(healthy().eventIds().sort()).toEqual([...ids].sort())
    const {
      rows: [order],
    } = await env.deps.db.query(
      `SELECT (SELECT max(resolved_at) FROM actions_event WHERE project = $1 AND target = 'ok') AS healthy_done,
              (SELECT min(last_state_change) FROM actions_event WHERE project = $1 AND target = 'dead' AND num_retries > 0) AS first_timeout,
              (SELECT count(*) FROM actions_event WHERE project = $1 AND target = 'ok' AND state = 'succeed')::int AS succeeded`,
      [project],
    )
    expect(order.succeeded).toBe(10)
    // Every healthy event was delivered before the dead target's first round of timeouts was recorded.
    expect(order.first_timeout).not.toBeNull()
    expect(order.healthy_done.getTime()).toBeLessThan(order.first_timeout.getTime())
    // The dead target's slice ended with its events waiting, each attempt counted, none lost or failed.
    expect(res).toMatchObject({ stop: 'slice', signal: 'continue' })
    const {
      rows: [dlq],
    } = await env.deps.db.query(
      `SELECT count(*)::int AS n, sum(num_retries)::int AS attempts, count(*) FILTER (WHERE state = 'failed')::int AS failed
       FROM actions_event WHERE project = $1 AND target = 'dead'`,
      [project],
    )
    expect(dlq).toEqual({ n: 1_000, attempts: dead().requests.length, failed: 0 })
  })

  it('starts every project of an SQS batch within its slice of a 100,000-event backlog, which leaves a continuation', async () => {
    await schemaFor(env.deps, 'deep', { t: { url: healthy().url } })
    await insertDue('deep', 't', 100_000)
    const small = ['small1', 'small2', 'small3']
    const ids: string[] = []
    for (const p of small) {
      await schemaFor(env.deps, p, { t: { url: healthy().url } })
      ids.push(...(await enqueueMany(env.deps, p, 'to_t', 10)))
    }
    await env.queue.drain()
    healthy().requests.length = 0
    const handler = createHandler(() => env.deps)
    const batch = ['deep', ...small].map((project, i) => ({
      messageId: `m${i}`,
      receiptHandle: `r${i}`,
      body: JSON.stringify({ project }),
      attributes: { ApproximateReceiveCount: '1', SentTimestamp: '0', SenderId: 'x', ApproximateFirstReceiveTimestamp: '0' },
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:signals',
      awsRegion: 'us-east-1',
    }))
    const res = await handler({ Records: batch }, createContext(600_000))

    expect(res).toEqual({ batchItemFailures: [] })
    const delivered = new Set(healthy().eventIds())
    expect(ids.filter(id => !delivered.has(id))).toEqual([])
    // The three did not wait for the backlog: most of it is still due, and it asked to be continued.
    const {
      rows: [deep],
    } = await env.deps.db.query(
      `SELECT count(*) FILTER (WHERE state = 'succeed')::int AS done, count(*) FILTER (WHERE state <> 'succeed')::int AS left
       FROM actions_event WHERE project = 'deep'`,
    )
    expect(deep.done).toBeGreaterThan(0)
    expect(deep.left).toBeGreaterThan(0)
    expect(await env.queue.drain()).toContainEqual({ project: 'deep' })
  }, 120_000)
})

describe('fair starts with a small pool', () => {
  it('starts every project of an invocation within two seconds behind a deep one, with DB_POOL_MAX=3 and the default 5 s slice', async () => {
    const small = await testEnv({ DB_POOL_MAX: '3', DISPATCH_TIME_MARGIN_MS: '1000' })
    const rx = await startReceiver()
    try {
      await schemaFor(small.deps, 'deep', { t: { url: rx.url } })
      await small.deps.db.query(
        `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, visible_at)
         SELECT gen_random_uuid(), 'deep', $1, 1, 't', 'to_t', jsonb_build_object('n', i), now() - interval '1 minute'
         FROM generate_series(1, 50000) AS i`,
        [TX],
      )
      const names = ['small1', 'small2', 'small3']
      for (const p of names) {
        await schemaFor(small.deps, p, { t: { url: rx.url + '/' + p } })
        await enqueueMany(small.deps, p, 'to_t', 10)
      }
      await small.queue.drain()
      const firstAt = new Map<string, number>()
      rx.respond((req, res) => {
        const p = req.path.slice(1) || 'deep'
        if (!firstAt.has(p)) firstAt.set(p, Date.now())
        res.end()
      })
      const handler = createHandler(() => small.deps)
      const started = Date.now()
      const res = await handler(
        {
          Records: ['deep', ...names].map((project, i) => ({
            messageId: `m${i}`,
            receiptHandle: `r${i}`,
            body: JSON.stringify({ project }),
            attributes: { ApproximateReceiveCount: '1', SentTimestamp: '0', SenderId: 'x', ApproximateFirstReceiveTimestamp: '0' },
            messageAttributes: {},
            md5OfBody: '',
            eventSource: 'aws:sqs',
            eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:signals',
            awsRegion: 'us-east-1',
          })),
        },
        createContext(600_000),
      )
      expect(res).toEqual({ batchItemFailures: [] })
      for (const p of names) {
        expect(firstAt.get(p), p).toBeDefined()
        expect((firstAt.get(p) ?? Infinity) - started, p).toBeLessThan(2_000)
      }
      // The deep project yielded with work left, and asked to be continued.
      expect(await small.queue.drain()).toContainEqual({ project: 'deep' })
    } finally {
      await rx.close()
      await small.close()
    }
  }, 120_000)
})
