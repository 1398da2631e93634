// Ids are the project's own: one tenant can neither refuse another's request by sending its
// ids first nor collide with it through mutation fan-out. Real Postgres, queue and receiver.
import { randomUUID } from 'node:crypto'
import { beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { main } from '../../lib/cli/main.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { derivedId } from '../../lib/enqueue/within.js'
import { enqueue } from '../../lib/enqueue.js'
import { createPayload, TX } from '../fixtures/schemas.js'
import { schemaFor } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'

const env = useHarness({ receiver: true })
beforeAll(async () => {
  for (const project of ['a', 'b']) await schemaFor(env.deps, project, { t: { url: env.rx.url } })
})
beforeEach(async () => {
  await env.db.pool.query('DELETE FROM actions_event')
})
const rows = async (id: string) =>
  (
    await env.db.pool.query<{ project: string; state: string; num_retries: number }>(
      'SELECT project, state, num_retries FROM actions_event WHERE id = $1 ORDER BY project',
      [id],
    )
  ).rows

describe('event ids scoped to their project', () => {
  it('stores and delivers the same id in two projects, each once', async () => {
    const id = randomUUID()
    for (const project of ['a', 'b']) {
      expect(
        await enqueue(env.deps, { project, transactionId: TX, events: [{ id, trigger: 'to_t', payload: createPayload(1) }] }),
      ).toMatchObject({ written: 1, eventIds: [id] })
    }
    // Idempotency within a project holds as before: a retried request writes nothing.
    expect(
      await enqueue(env.deps, { project: 'a', transactionId: TX, events: [{ id, trigger: 'to_t', payload: createPayload(1) }] }),
    ).toMatchObject({ written: 0, eventIds: [id] })
    expect(await drainProject(env.deps, 'a', FOREVER)).toMatchObject({ succeeded: 1 })
    expect(await drainProject(env.deps, 'b', FOREVER)).toMatchObject({ succeeded: 1 })
    expect(env.rx.eventIds()).toEqual([id, id])
    expect(await rows(id)).toEqual([
      { project: 'a', state: 'succeed', num_retries: 1 },
      { project: 'b', state: 'succeed', num_retries: 1 },
    ])
  })

  it('derives different fan-out ids for one mutation sent to two projects', async () => {
    const id = randomUUID()
    const mutation = { id, payload: { operation: 'create', entity: 'Article', id: 7, values: {} } }
    const [ra, rb] = [
      await enqueue(env.deps, { project: 'a', transactionId: TX, events: [mutation] }),
      await enqueue(env.deps, { project: 'b', transactionId: TX, events: [mutation] }),
    ]
    expect(ra.eventIds).toEqual([derivedId('a', id, 'to_t')])
    expect(rb.eventIds).toEqual([derivedId('b', id, 'to_t')])
    expect(ra.eventIds[0]).not.toBe(rb.eventIds[0])
    expect(ra.written + rb.written).toBe(2)
    // The parts are delimited: shifting characters between project and trigger changes the id.
    expect(derivedId('ab', id, 'c')).not.toBe(derivedId('a', id, 'bc'))
  })

  it('asks the operator to name the project of an id two projects use, and acts on the one named', async () => {
    const id = randomUUID()
    for (const project of ['a', 'b'])
      await enqueue(env.deps, { project, transactionId: TX, events: [{ id, trigger: 'to_t', payload: createPayload(1) }] })
    const out: string[] = []
    const err: string[] = []
    const run = (...argv: string[]) => main(argv, { DATABASE_URL: env.db.url }, { out: s => out.push(s), err: s => err.push(s) })
    expect(await run('events', 'stop', id)).toBe(1)
    expect(err.join('\n')).toMatch(/exists in 2 projects; name one \(--project\)/)
    expect(await rows(id)).toEqual([
      { project: 'a', state: 'created', num_retries: 0 },
      { project: 'b', state: 'created', num_retries: 0 },
    ])
    expect(await run('events', 'stop', id, '--project', 'b')).toBe(0)
    expect(await rows(id)).toEqual([
      { project: 'a', state: 'created', num_retries: 0 },
      { project: 'b', state: 'stopped', num_retries: 0 },
    ])
    out.length = 0
    expect(await run('events', 'show', id, '--project', 'a')).toBe(0)
    expect(JSON.parse(out.join('\n'))).toMatchObject({ id, project: 'a', state: 'created' })
    expect(await run('events', 'show', randomUUID(), '--project', 'a')).toBe(1)
    expect(err.join('\n')).toMatch(/no event .* in project a/)
  })
})
