// What a capped target's claims cost the database: each freed slot of a `maxInFlight: 2` target makes
// a claim, so what one claim reads and how many statements it takes is paid per event. A neighbour
// found without due events must not be asked along at every freed slot: its claim reads the due index
// past the capped target's whole backlog to find nothing.
import { describe, expect, it } from 'vitest'
import { drainProject } from '../../lib/dispatch/drain.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { useHarness } from '../helpers/harness.js'
import { countStatements } from '../helpers/statements.js'

const env = useHarness({ config: { DISPATCH_TIME_MARGIN_MS: '200' }, receiver: true })

/** Index tuples read from the due index so far, every pool backend's counters flushed first. */
async function dueIndexReads(): Promise<number> {
  const pool = env.deps.db
  const clients = await Promise.all(Array.from({ length: Math.max(1, pool.totalCount) }, () => pool.connect()))
  try {
    await Promise.all(clients.map(c => c.query('SELECT pg_stat_force_next_flush()')))
    const { rows } = await clients[0]!.query<{ n: string }>(
      `SELECT pg_stat_clear_snapshot(), (SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'actions_event_due_idx') AS n`,
    )
    return Number(rows[0]?.n ?? 0)
  } finally {
    for (const c of clients) c.release()
  }
}

describe('a capped target beside an uncapped one with nothing due', () => {
  it('claims for the capped target alone: a few due-index rows and statements per event', async () => {
    const project = env.project
    await schemaFor(env.deps, project, {
      a: { url: env.rx.url + '/a', timeoutMs: 1000, maxInFlight: 2 },
      b: { url: env.rx.url + '/b', timeoutMs: 1000 },
    })
    // One event of b (it is found empty after it), then a backlog of a that outlasts the drain.
    await enqueueMany(env.deps, project, 'to_b', 1)
    await enqueueMany(env.deps, project, 'to_a', 1000, 10)
    const before = await dueIndexReads()
    const statements = countStatements(env.deps.db)
    const until = Date.now() + 1500
    const result = await drainProject(env.deps, project, { remainingMs: () => until - Date.now() + 1200 })
    const sent = statements.count()
    const read = (await dueIndexReads()) - before
    const delivered = result.succeeded
    expect(delivered).toBeGreaterThan(20)
    expect(delivered).toBeLessThan(1000)
    // Each claim of a reads its own head (its events in flight, then one or two due); asked along, b's
    // claim read past the rest of a's backlog (about 1,000 rows) at every freed slot.
    expect(read / delivered).toBeLessThan(100)
    // Per freed slot a record, then BEGIN, the caps' lock, the in-flight count, the claim, the save and
    // COMMIT, shared by both events when both slots free together: about four per event (five with the
    // neighbour's claim asked along).
    expect(sent / delivered).toBeLessThanOrEqual(6)
  }, 30_000)
})
