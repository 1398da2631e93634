// Every attempt counts and the attempt log stays bounded: an event its target's
// breaker holds is probed again and again during an outage; its num_retries says how many attempts
// were made, and its log keeps the first entry and the last 20, counting the rest.
import { describe, expect, it } from 'vitest'
import { claimBatches } from '../../lib/db/claim.js'
import { DEFAULT_RECORD_SETTINGS } from '../../lib/db/health.js'
import { LOG_KEPT_LAST } from '../../lib/db/log.js'
import { recordAttempts } from '../../lib/db/record.js'
import { useDatabase } from '../helpers/harness.js'

const db = useDatabase()

describe('a held event probed through a long outage', () => {
  it('counts every attempt and keeps its log at the first entry and the last 20', async () => {
    const ATTEMPTS = 60
    await db.pool.query(`INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
      VALUES (gen_random_uuid(), 'week', gen_random_uuid(), 1, 't', 'x', '{}'::jsonb)`)
    for (let i = 1; i <= ATTEMPTS; i++) {
      // Claimed as a probe would be (the pause is lifted for the claim only), then failed with 503.
      await db.pool.query(`UPDATE actions_event SET visible_at = now() WHERE project = 'week'`)
      await db.pool.query(`UPDATE actions_target_health SET paused_at = NULL, paused_reason = NULL, probe_at = NULL WHERE project = 'week'`)
      const { batches } = await claimBatches(
        db.pool,
        'week',
        [{ name: 't', batchSize: 1, leaseMs: 60_000, maxBatches: 1, maxAttempts: 3 }],
        1,
        { waiting: [], budgetBytes: 64e6, atLeastOne: true },
      )
      const e = batches[0]?.events[0]
      if (!e) throw new Error(`attempt ${i}: nothing claimed`)
      expect(e.num_retries).toBe(i - 1)
      await recordAttempts(
        db.pool,
        [
          {
            id: e.id,
            lease: e.lease,
            project: 'week',
            target: 't',
            attempts: e.num_retries,
            outcome: { ok: false, code: 503, errorMessage: `attempt ${i}` },
            durationMs: 1,
            maxAttempts: 3,
            initialRepeatIntervalMs: 1,
          },
        ],
        DEFAULT_RECORD_SETTINGS,
      )
    }
    const {
      rows: [row],
    } = await db.pool.query<{ state: string; num_retries: number; log: Array<{ errorMessage: string }>; log_dropped: number }>(
      `SELECT state, num_retries, log, log_dropped FROM actions_event WHERE project = 'week'`,
    )
    // Held, not failed: its target was down for every attempt since the first.
    expect(row?.state).toBe('retrying')
    expect(row?.num_retries).toBe(ATTEMPTS)
    expect(row?.log).toHaveLength(1 + LOG_KEPT_LAST)
    expect(row?.log_dropped).toBe(ATTEMPTS - 1 - LOG_KEPT_LAST)
    expect(row?.log.map(l => l.errorMessage)).toEqual([
      'attempt 1',
      ...Array.from({ length: LOG_KEPT_LAST }, (_, k) => `attempt ${ATTEMPTS - LOG_KEPT_LAST + 1 + k}`),
    ])
  })
})
