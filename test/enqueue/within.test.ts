import { beforeAll, describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/dispatch.js'
import { withTransaction } from '../../lib/db/pool.js'
import { enqueueWithin, signalAfterCommit } from '../../lib/enqueue/within.js'
import { EnqueueValidationError } from '../../lib/enqueue/errors.js'
import { createContext, sqsEvent } from '../helpers/lambda.js'
import { useHarness } from '../helpers/harness.js'
import { schemaFor } from '../helpers/events.js'
import { createPayload, TX } from '../fixtures/schemas.js'

// The README's example: a producer writes events in its own content transaction.
const env = useHarness({ config: { DISPATCH_TIME_MARGIN_MS: '1000' }, receiver: true })
beforeAll(async () => {
  await schemaFor(env.deps, 'tx', { t: { url: env.rx.url } })
})
const rows = async () => (await env.db.pool.query<{ id: string }>(`SELECT id FROM actions_event WHERE project = 'tx'`)).rows.map(r => r.id)
const request = (n: number) => ({ project: 'tx', transactionId: TX, events: [{ trigger: 'to_t', payload: createPayload(n) }] })

describe('enqueueWithin', () => {
  it("writes nothing when the producer's transaction rolls back, and nothing is sent", async () => {
    const failed = await withTransaction(env.db.pool, async client => {
      await client.query('CREATE TEMP TABLE content (x int)')
      await enqueueWithin(client, request(1))
      throw new Error('the content mutation failed')
    }).catch((e: unknown) => e)
    expect(String(failed)).toContain('content mutation failed')
    expect(await rows()).toEqual([])
  })

  it('delivers committed events through dispatch after the signal', async () => {
    const result = await withTransaction(env.db.pool, client => enqueueWithin(client, request(2)))
    await env.queue.drain()
    await signalAfterCommit(env.deps.signals, result)
    const signals = await env.queue.drain()
    expect(signals).toEqual([{ project: 'tx' }])
    const dispatch = createHandler(() => env.deps)
    await dispatch(sqsEvent(JSON.stringify(signals[0])), createContext())
    expect(env.rx.eventIds()).toEqual(result.eventIds)
    expect(env.rx.requests[0]?.body.events[0]).toMatchObject(createPayload(2))
  })

  it('throws a validation error inside the transaction and leaves the rest of it to the caller', async () => {
    const err = await withTransaction(env.db.pool, client => enqueueWithin(client, { ...request(3), project: 'nope' })).catch(
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(EnqueueValidationError)
  })
})
