import { describe, expect, it } from 'vitest'
import { drainProject } from '../../lib/dispatch/drain.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'

// A drain that fails hands back the claims it has not started at once, instead of leaving them
// leased: the events are due again before the failing invocation has even returned.

// One worker, so the claim queue runs deep: most claimed events are unstarted when the drain fails.
const env = useHarness({ config: { LEASE_MARGIN_MS: '1000', DISPATCH_CONCURRENCY: '1' }, receiver: true })
const db = () => env.deps.db

/** Events of the project by what the database says about them now. */
async function tally(project: string) {
  const { rows } = await db().query<{ state: string; due: boolean; num_retries: number; n: number }>(
    `SELECT state, visible_at <= now() AND (lease_until IS NULL OR lease_until <= now()) AS due, num_retries, count(*)::int AS n FROM actions_event WHERE project = $1
     GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
    [project],
  )
  return rows
}

describe('a drain that fails', () => {
  it('releases its queued claims at once when a bug throws mid-drain', async () => {
    const project = 'bug'
    // A lease of 6 s: the batch under way when the bug hits is still leased when the test looks.
    await schemaFor(env.deps, project, { t: { url: env.rx.url, timeoutMs: 5000 } })
    const ids = await enqueueMany(env.deps, project, 'to_t', 60)
    let calls = 0
    const failing = {
      ...FOREVER,
      onBatch: () => {
        if (++calls === 1) throw new Error('a bug in a hook')
      },
    }
    const logs = env.captureLogs()
    await expect(drainProject(env.deps, project, failing).finally(() => logs.restore())).rejects.toThrow('a bug in a hook')
    // One batch was under way and stays leased (its outcome was lost with the bug); every other claim is
    // back as it was claimed (created: never attempted), due now.
    expect(env.rx.requests).toHaveLength(1)
    expect(await tally(project)).toEqual([
      { state: 'created', due: true, num_retries: 0, n: 59 },
      { state: 'processing', due: false, num_retries: 0, n: 1 },
    ])
    // A successor takes them at once, without waiting for leases.
    expect(await drainProject(env.deps, project, FOREVER)).toMatchObject({ succeeded: 59, stop: 'idle' })
    expect(new Set(env.rx.eventIds()).size).toBe(60)
    expect(new Set(env.rx.eventIds())).toEqual(new Set(ids))
  })

  it('releases its queued claims at once when a claim statement fails, and loses nothing', async () => {
    const project = 'claimfail'
    // A real database fault: once the gate is open, any claim of this project's events raises.
    await db().query(`CREATE TABLE claim_gate (open boolean)`)
    await db().query(`CREATE FUNCTION fail_claims() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM claim_gate) THEN RAISE EXCEPTION 'claims are failing'; END IF;
        RETURN NEW;
      END $$`)
    await db().query(`CREATE TRIGGER fail_claims BEFORE UPDATE ON actions_event FOR EACH ROW
      WHEN (NEW.project = 'claimfail' AND NEW.state = 'processing' AND OLD.state <> 'processing') EXECUTE FUNCTION fail_claims()`)
    try {
      await schemaFor(env.deps, project, { t: { url: env.rx.url, timeoutMs: 1000 } })
      const ids = await enqueueMany(env.deps, project, 'to_t', 300)
      // The first claim has taken its batches by the time the first request arrives; later claims fail.
      env.rx.respond(async (_, res) => {
        if (env.rx.requests.length === 1) await db().query('INSERT INTO claim_gate VALUES (true)')
        res.end()
      })
      const logs = env.captureLogs()
      await expect(drainProject(env.deps, project, FOREVER).finally(() => logs.restore())).rejects.toThrow('claims are failing')
      const delivered = env.rx.requests.length
      expect(delivered).toBeGreaterThan(0)
      expect(delivered).toBeLessThan(300)
      // Delivered ones are recorded; every claim not started is due now, its attempts untouched.
      const after = await tally(project)
      expect(after.filter(r => r.state === 'succeed').reduce((s, r) => s + r.n, 0)).toBe(delivered)
      expect(after.filter(r => r.state !== 'succeed').every(r => r.due && r.num_retries === 0)).toBe(true)
      expect(after.some(r => r.state === 'created')).toBe(true)

      await db().query('DELETE FROM claim_gate')
      expect(await drainProject(env.deps, project, FOREVER)).toMatchObject({ succeeded: 300 - delivered, stop: 'idle' })
      expect(env.rx.eventIds()).toHaveLength(300)
      expect(new Set(env.rx.eventIds())).toEqual(new Set(ids))
    } finally {
      await db().query('DROP TRIGGER fail_claims ON actions_event; DROP FUNCTION fail_claims(); DROP TABLE claim_gate')
    }
  })
})
