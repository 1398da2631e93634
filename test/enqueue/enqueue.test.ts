import { randomUUID } from 'node:crypto'
import { beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/enqueue.js'
import { countStatements } from '../helpers/statements.js'
import { storeSchema } from '../../lib/db/schemas.js'
import { createDeps } from '../../lib/deps.js'
import { EnqueueValidationError } from '../../lib/enqueue/errors.js'
import { createContext } from '../helpers/lambda.js'
import { useHarness } from '../helpers/harness.js'
import { sqsClient } from '../helpers/sqs.js'
import { createPayload, sampleSchema, TX } from '../fixtures/schemas.js'

const env = useHarness()
const handler = createHandler(() => env.deps)
beforeAll(async () => {
  await storeSchema(env.db.pool, 'blog', sampleSchema())
  await storeSchema(env.db.pool, 'shop', sampleSchema())
})
beforeEach(async () => {
  await env.db.pool.query('DELETE FROM actions_event')
})

const invoke = (event: unknown) => handler(event, createContext())
const rowCount = async () => Number((await env.db.pool.query('SELECT count(*) AS n FROM actions_event')).rows[0].n)
const enqueuedCounter = async (project: string) => {
  const metric = (await env.deps.metrics.registry.getMetricsAsJSON()).find(m => m.name === 'contember_actions_events_enqueued_total')
  return metric?.values.find(v => v.labels.contember_project === project)?.value ?? 0
}

describe('enqueue', () => {
  it('writes every event created and due now, with target and priority from the trigger, and signals once', async () => {
    const before = await enqueuedCounter('blog')
    const res = await invoke({
      project: 'blog',
      transactionId: TX,
      stage: 'live',
      identityId: randomUUID(),
      ipAddress: '10.0.0.1',
      userAgent: 'cms',
      events: [
        { trigger: 'article_created', payload: createPayload(1) },
        { trigger: 'article_urgent', payload: { operation: 'delete', entity: 'Article', id: 2 } },
        {
          trigger: 'author_watch',
          payload: {
            operation: 'watch',
            entity: 'Author',
            id: 'a1',
            trigger: 'author_watch',
            events: [{ operation: 'update', entity: 'Author', id: 'a1', values: { name: 'X' } }],
          },
        },
      ],
    })
    expect(res.eventIds).toHaveLength(3)
    const { rows } = await env.db.pool.query(
      `SELECT id, project, state, target, trigger, priority, stage, schema_version, num_retries, payload, log,
              visible_at <= now() AS due, transaction_id, ip_address, user_agent
       FROM actions_event ORDER BY priority DESC, trigger`,
    )
    expect(rows.map(r => [r.trigger, r.target, r.priority, r.state])).toEqual([
      ['article_urgent', 'hook', 10, 'created'],
      ['article_created', 'hook', 0, 'created'],
      ['author_watch', 'other', 0, 'created'],
    ])
    for (const r of rows) {
      expect(r).toMatchObject({
        project: 'blog',
        stage: 'live',
        schema_version: 1,
        num_retries: 0,
        log: [],
        due: true,
        transaction_id: TX,
        ip_address: '10.0.0.1',
        user_agent: 'cms',
      })
      expect(res.eventIds).toContain(r.id)
    }
    expect(rows[1].payload).toEqual(createPayload(1))
    expect(await env.queue.drain()).toEqual([{ project: 'blog' }])
    expect(await enqueuedCounter('blog')).toBe(before + 3)
  })

  it('keeps producer-supplied ids and writes nothing twice when the same request is retried', async () => {
    const ids = [randomUUID(), randomUUID()]
    const req = {
      project: 'blog',
      transactionId: TX,
      events: ids.map((id, i) => ({ id, trigger: 'article_created', payload: createPayload(i) })),
    }
    const before = await enqueuedCounter('blog')
    expect((await invoke(req)).eventIds).toEqual(ids)
    expect((await invoke(req)).eventIds).toEqual(ids)
    expect(await rowCount()).toBe(2)
    expect(await enqueuedCounter('blog')).toBe(before + 2)
  })

  it('answers how many rows a retried request wrote', async () => {
    const req = {
      project: 'blog',
      transactionId: TX,
      events: [{ id: randomUUID(), trigger: 'article_created', payload: createPayload(1) }],
    }
    expect(await invoke(req)).toMatchObject({ written: 1, unmatched: [] })
    expect(await invoke(req)).toMatchObject({ written: 0, unmatched: [] })
  })

  const bad: Array<[string, unknown, RegExp]> = [
    ['a missing project', { transactionId: TX, events: [] }, /project: /],
    ['a malformed transaction id', { project: 'blog', transactionId: 'nope', events: [] }, /transactionId: /],
    ['an unknown top-level field', { project: 'blog', transactionId: TX, events: [], extra: 1 }, /extra/],
    [
      'an unknown project',
      { project: 'nope', transactionId: TX, events: [{ trigger: 'article_created', payload: createPayload() }] },
      /project: unknown project "nope"/,
    ],
    [
      'an unknown trigger in the second event',
      {
        project: 'blog',
        transactionId: TX,
        events: [
          { trigger: 'article_created', payload: createPayload() },
          { trigger: 'ghost', payload: createPayload() },
        ],
      },
      /events\.1\.trigger: unknown trigger "ghost"/,
    ],
    [
      'an invalid payload in the third event',
      {
        project: 'blog',
        transactionId: TX,
        events: [
          { trigger: 'article_created', payload: createPayload() },
          { trigger: 'article_created', payload: createPayload() },
          { trigger: 'article_created', payload: { operation: 'create', entity: 'Article', id: 1 } },
        ],
      },
      /events\.2\.payload/,
    ],
    [
      'an unknown payload operation',
      {
        project: 'blog',
        transactionId: TX,
        events: [{ trigger: 'article_created', payload: { operation: 'upsert', entity: 'A', id: 1 } }],
      },
      /events\.0\.payload/,
    ],
    [
      'a malformed event id',
      { project: 'blog', transactionId: TX, events: [{ id: '42', trigger: 'article_created', payload: createPayload() }] },
      /events\.0\.id/,
    ],
    ['not an object at all', 'hello', /expected object/],
  ]
  for (const [what, req, message] of bad) {
    it(`rejects ${what}, naming the field, and writes nothing`, async () => {
      const err = await invoke(req).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(EnqueueValidationError)
      expect(String(err)).toMatch(message)
      expect(await rowCount()).toBe(0)
      expect(await env.queue.drain()).toEqual([])
    })
  }

  it('signals once per request and once per project', async () => {
    await invoke({
      project: 'blog',
      transactionId: TX,
      events: [1, 2, 3].map(i => ({ trigger: 'article_created', payload: createPayload(i) })),
    })
    await invoke({ project: 'shop', transactionId: TX, events: [{ trigger: 'article_created', payload: createPayload() }] })
    expect(await env.queue.drain()).toEqual([{ project: 'blog' }, { project: 'shop' }])
  })

  it('commits the events and succeeds when the queue is unreachable, logging the failure without the queue URL', async () => {
    // A runtime whose SQS endpoint refuses connections: nothing listens on port 9 of 127.0.0.1.
    const deps = createDeps(env.deps.config, { sqs: sqsClient('http://127.0.0.1:9'), db: env.db.pool, log: env.log })
    const deadHandler = createHandler(() => deps)
    const logs = env.captureLogs()
    try {
      const res = await deadHandler(
        { project: 'blog', transactionId: TX, events: [{ trigger: 'article_created', payload: createPayload() }] },
        createContext(),
      )
      expect(res.eventIds).toHaveLength(1)
    } finally {
      logs.restore()
      await deps.http.close()
    }
    expect(await rowCount()).toBe(1)
    const errors = logs.records().filter(r => r.level === 'error')
    expect(errors).toHaveLength(1)
    expect(errors[0]?.msg).toMatch(/sweeper/)
    expect(logs.lines.join('\n')).not.toContain(env.deps.config.SIGNAL_QUEUE_URL)
  })

  it('writes 1,000 events with a bounded number of statements', async () => {
    const statements = countStatements(env.db.pool)
    await invoke({
      project: 'blog',
      transactionId: TX,
      events: Array.from({ length: 1000 }, (_, i) => ({ trigger: 'article_created', payload: createPayload(i) })),
    })
    expect(await rowCount()).toBe(1000)
    // One schema read and one multi-row insert; a statement per event would be 1,000.
    expect(statements.count()).toBeLessThanOrEqual(2)
  })
})
