// A poison event cannot hold its batch: a receiver that answers 400 to any batch
// holding one bad event. The batch is split in halves on each such answer until the bad event travels
// alone; its neighbours are delivered, and it fails by itself after its attempts.
import { describe, expect, it } from 'vitest'
import { drainProject } from '../../lib/dispatch/drain.js'
import { enqueueMany, schemaFor, states, targetHealth } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'

const env = useHarness({ config: { DISPATCH_CONCURRENCY: '2', BREAKER_FAILURES: '2' }, receiver: true })

describe('a batch with one poison event', () => {
  it('delivers the other nine of a batch of ten and fails the poison event alone', async () => {
    let poison = ''
    const delivered = new Map<string, number>()
    const sizes: number[] = []
    env.rx.respond((req, res) => {
      const ids: string[] = req.body.events.map((e: { meta: { eventId: string } }) => e.meta.eventId)
      sizes.push(ids.length)
      if (ids.includes(poison)) {
        res.statusCode = 400
        res.end()
        return
      }
      for (const id of ids) delivered.set(id, (delivered.get(id) ?? 0) + 1)
      res.end()
    })
    await schemaFor(env.deps, 'poison', { t: { url: env.rx.url, batchSize: 10, maxAttempts: 3, initialRepeatIntervalMs: 1 } })
    const ids = await enqueueMany(env.deps, 'poison', 'to_t', 10)
    poison = ids[6] ?? ''
    for (let i = 0; i < 40; i++) {
      await drainProject(env.deps, 'poison', FOREVER)
      if ([...(await states(env.deps, 'poison')).values()].every(s => s.state === 'succeed' || s.state === 'failed')) break
      await new Promise(r => setTimeout(r, 20))
    }
    const rows = await states(env.deps, 'poison')
    expect(ids.filter(id => id !== poison).map(id => rows.get(id)?.state)).toEqual(Array(9).fill('succeed'))
    expect([...delivered.values()].every(v => v === 1)).toBe(true)
    expect(rows.get(poison)?.state).toBe('failed')
    // Its last attempt was made alone, and the batches it travelled in halved each time.
    expect(sizes[0]).toBe(10)
    expect(sizes.at(-1)).toBe(1)
    expect(sizes.filter(n => n > 1).every((n, i, all) => i === 0 || n <= all[i - 1]!)).toBe(true)
    // A rejection is no outage: the target never paused.
    expect((await targetHealth(env.deps.db, 'poison', 't'))?.paused_at ?? null).toBeNull()
  })
})
