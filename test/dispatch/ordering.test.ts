// Per-entity order, through the real dispatch path: four drains at once, eight requests in
// flight each, a real receiver that watches every key, and a retry in the middle of one entity's updates.
import { describe, expect, it } from 'vitest'
import { drainProject } from '../../lib/dispatch/drain.js'
import { enqueue } from '../../lib/enqueue.js'
import { TX } from '../fixtures/schemas.js'
import { schemaFor } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'

const env = useHarness({ config: { DISPATCH_CONCURRENCY: '8' }, receiver: true, project: 'order' })

type Delivered = { key: string; v: number; at: number; ok: boolean }
const update = (key: string, v: number) => ({
  trigger: 'to_t',
  payload: { operation: 'update', entity: 'Article', id: key, values: { v } },
})

/** Drains with four concurrent drains, again and again, until `done` holds (bounded in time). */
async function drainUntil(done: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!done()) {
    if (Date.now() > deadline)
      throw new Error(
        `timed out draining: ${JSON.stringify((await env.db.pool.query('SELECT state, num_retries, visible_at > now() AS later, count(*)::int AS n FROM actions_event WHERE project = $1 GROUP BY 1, 2, 3', [env.project])).rows)}`,
      )
    await Promise.all([1, 2, 3, 4].map(() => drainProject(env.deps, env.project, FOREVER)))
    await new Promise(r => setTimeout(r, 20))
  }
}

describe.each([1, 10])('ordering: entity, batchSize %i', batchSize => {
  it("delivers each entity's updates strictly in order, one request per key at a time, while the other entities go on", async () => {
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, batchSize, initialRepeatIntervalMs: 300 } })
    const inFlight = new Map<string, number>()
    let maxInFlight = 0
    let twoOfAKeyInABatch = 0
    const seen: Delivered[] = []
    let refused = false
    env.rx.respond((req, res) => {
      const keys: Array<{ key: string; v: number }> = req.body.events.map((e: { id: string; values: { v: number } }) => ({
        key: String(e.id),
        v: e.values.v,
      }))
      if (new Set(keys.map(k => k.key)).size < keys.length) twoOfAKeyInABatch++
      for (const { key } of keys) {
        const now = (inFlight.get(key) ?? 0) + 1
        inFlight.set(key, now)
        maxInFlight = Math.max(maxInFlight, now)
      }
      // The first attempt of e7's second update is refused: its later updates must wait for the retry.
      const refuse = !refused && keys.some(k => k.key === 'e7' && k.v === 2)
      if (refuse) refused = true
      setTimeout(() => {
        for (const { key, v } of keys) {
          inFlight.set(key, (inFlight.get(key) ?? 1) - 1)
          seen.push({ key, v, at: Date.now(), ok: !refuse })
        }
        res.statusCode = refuse ? 503 : 200
        res.end()
      }, 2)
    })
    // Five rounds, one request each: every keyed entity's update v, interleaved with 100 other events.
    for (let v = 1; v <= 5; v++) {
      const events = []
      for (let k = 0; k < 50; k++) {
        events.push(update(`e${k}`, v))
        events.push(update(`other-${v}-${2 * k}`, 1), update(`other-${v}-${2 * k + 1}`, 1))
      }
      await enqueue(env.deps, { project: env.project, transactionId: TX, events })
    }
    const expected = 50 * 5 + 500
    await drainUntil(() => seen.filter(s => s.ok).length >= expected)

    expect(seen.filter(s => s.ok)).toHaveLength(expected)
    expect(maxInFlight).toBe(1)
    expect(twoOfAKeyInABatch).toBe(0)
    for (let k = 0; k < 50; k++) {
      const attempts = seen.filter(s => s.key === `e${k}`)
      expect(
        attempts.filter(s => s.ok).map(s => s.v),
        `e${k}`,
      ).toEqual([1, 2, 3, 4, 5])
      // Every attempt in order too: a retry comes before anything later of its key.
      expect(
        attempts.map(s => s.v),
        `e${k}`,
      ).toEqual([...attempts.map(s => s.v)].sort((a, b) => a - b))
    }
    const e7 = seen.filter(s => s.key === 'e7')
    expect(e7.map(s => [s.v, s.ok])).toEqual([
      [1, true],
      [2, false],
      [2, true],
      [3, true],
      [4, true],
      [5, true],
    ])
    const refusedAt = e7[1]!.at
    const retriedAt = e7[2]!.at
    const third = e7[3]!.at
    expect(third).toBeGreaterThanOrEqual(retriedAt)
    // The others went on while e7 waited for its retry.
    expect(seen.filter(s => s.key !== 'e7' && s.at > refusedAt && s.at < retriedAt).length).toBeGreaterThan(0)
    const { rows } = await env.db.pool.query(`SELECT state, count(*)::int AS n FROM actions_event WHERE project = $1 GROUP BY state`, [
      env.project,
    ])
    expect(rows).toEqual([{ state: 'succeed', n: expected }])
  })
})

describe('ordering: none', () => {
  it("leaves a key's events unordered: they are claimed together", async () => {
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, batchSize: 10, ordering: 'none' } })
    await enqueue(env.deps, { project: env.project, transactionId: TX, events: [1, 2, 3].map(v => update('same', v)) })
    expect(await drainProject(env.deps, env.project, FOREVER)).toMatchObject({ succeeded: 3, batches: 1 })
    expect(env.rx.requests[0]?.body.events.map((e: { values: { v: number } }) => e.values.v)).toEqual([1, 2, 3])
  })

  it('takes priority across entities, never within one', async () => {
    await schemaFor(
      env.deps,
      env.project,
      { t: { url: env.rx.url, batchSize: 10 } },
      { to_t: { target: 't' }, urgent: { target: 't', priority: 9 } },
    )
    await enqueue(env.deps, {
      project: env.project,
      transactionId: TX,
      events: [update('a', 1), update('b', 1), { ...update('a', 2), trigger: 'urgent' }, { ...update('c', 1), trigger: 'urgent' }],
    })
    await drainUntil(() => env.rx.eventIds().length >= 4)
    const order = env.rx.requests.map(r => r.body.events.map((e: { id: string; values: { v: number } }) => `${e.id}${e.values.v}`))
    // c1 (urgent, its own entity) first; a2 (urgent) only after a1, in a later request.
    expect(order[0]).toEqual(['c1', 'a1', 'b1'])
    expect(order[1]).toEqual(['a2'])
  })
})
