// Upstream's dispatcher runs one loop per project and sends one request at a time. Actions keeps several
// in flight by default (DISPATCH_CONCURRENCY, and several drains at once); `maxInFlight: 1` with
// `ordering: 'none'` on a target gives that target upstream's delivery back (docs/compatibility.md).
import { describe, expect, it } from 'vitest'
import { drainProject } from '../../lib/dispatch/drain.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { useHarness } from '../helpers/harness.js'

const env = useHarness({ config: { DISPATCH_TIME_MARGIN_MS: '200' }, receiver: true })

/** Holds every request 25 ms, counting how many are in flight at most, and records each event's entity in arrival order. */
function countingReceiver() {
  let inFlight = 0
  const seen = { most: 0, order: [] as number[] }
  env.rx.respond((req, res) => {
    seen.most = Math.max(seen.most, ++inFlight)
    for (const e of req.body.events as Array<{ id: number }>) seen.order.push(e.id)
    setTimeout(() => {
      inFlight--
      res.end()
    }, 25)
  })
  return seen
}

/** Six low-priority events (entities 0–5), then six high-priority ones (100–105), drained by three drains at once. */
async function deliver(project: string, target: Record<string, unknown>) {
  await schemaFor(
    env.deps,
    project,
    { t: { url: env.rx.url, timeoutMs: 2000, ...target } },
    { lo: { target: 't' }, hi: { target: 't', priority: 5 } },
  )
  await enqueueMany(env.deps, project, 'lo', 6, 0)
  await enqueueMany(env.deps, project, 'hi', 6, 100)
  const until = Date.now() + 5_000
  await Promise.all([1, 2, 3].map(() => drainProject(env.deps, project, { remainingMs: () => until - Date.now() })))
}

describe("upstream's one request at a time", () => {
  it("is what maxInFlight: 1 gives a target across drains, in upstream's order (priority, then arrival)", async () => {
    const seen = countingReceiver()
    await deliver('one', { maxInFlight: 1, ordering: 'none' })
    expect(seen.most).toBe(1)
    expect(seen.order).toEqual([100, 101, 102, 103, 104, 105, 0, 1, 2, 3, 4, 5])
  }, 30_000)

  it('is not the default: without it, several requests of one target are in flight at once', async () => {
    const seen = countingReceiver()
    await deliver('many', {})
    expect(seen.order).toHaveLength(12)
    expect(seen.most).toBeGreaterThan(1)
  }, 30_000)
})
