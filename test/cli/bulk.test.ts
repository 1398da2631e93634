// Bulk replay and stop, against a real database and the SQS emulator.
import { beforeEach, describe, expect, it } from 'vitest'
import { eventsCommand } from '../../lib/cli/events.js'
import { MAX_BULK_EVENTS } from '../../lib/schema/limits.js'
import { createPool } from '../../lib/db/pool.js'
import { countStatements } from '../helpers/statements.js'
import { runCli } from '../helpers/cli.js'
import { useHarness } from '../helpers/harness.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'

const env = useHarness()
beforeEach(async () => {
  await env.deps.db.query('DELETE FROM actions_event')
})
const run = (...argv: string[]) => runCli(env.cliEnv(), argv)

/** Makes events look as dispatch leaves them: `state` after `attempts` failed attempts, one log entry each, created at `createdAt` (one second apart). */
async function age(ids: string[], state: 'failed' | 'retrying', createdAt: string, attempts = 3) {
  await env.deps.db.query(
    `UPDATE actions_event e SET state = $2::actions_event_state, num_retries = $4,
       resolved_at = CASE WHEN $2 = 'failed' THEN now() END, visible_at = now() + interval '1 hour',
       created_at = $3::timestamptz + n.i * interval '1 second',
       log = (SELECT jsonb_agg(jsonb_build_object('ok', false, 'code', 503)) FROM generate_series(1, $4))
     FROM unnest($1::uuid[]) WITH ORDINALITY AS n(id, i) WHERE e.id = n.id`,
    [ids, state, createdAt, attempts],
  )
}

/** Events of a project by target, state (in the enum's order), intact history and due-ness, with counts. */
async function census(project: string) {
  const { rows } = await env.deps.db.query<{ target: string; state: string; intact: boolean; due: boolean; n: number }>(
    `SELECT target, state, num_retries = 3 AND jsonb_array_length(log) = 3 AS intact, visible_at <= now() AS due, count(*)::int AS n
     FROM actions_event WHERE project = $1 GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`,
    [project],
  )
  return rows
}

describe('bulk retry and stop', () => {
  it('retries 10,000 failed events of one target in a time range with one statement and one signal, touching nothing else', async () => {
    await schemaFor(env.deps, 'bulk', { a: { url: 'http://127.0.0.1:9' }, b: { url: 'http://127.0.0.1:9' } })
    await schemaFor(env.deps, 'other', { a: { url: 'http://127.0.0.1:9' } })
    const inRange = await enqueueMany(env.deps, 'bulk', 'to_a', 10_000)
    // From 2024-05-01T00:00:00Z on: the since bound is inclusive.
    await age(inRange, 'failed', '2024-04-30T23:59:59Z')
    const before = await enqueueMany(env.deps, 'bulk', 'to_a', 50)
    await age(before, 'failed', '2024-04-30T00:00:00Z')
    const after = await enqueueMany(env.deps, 'bulk', 'to_a', 50)
    // 2024-05-02T00:00:01Z onwards: the until bound is exclusive, so the first one at exactly midnight is out too.
    await age(after, 'failed', '2024-05-01T23:59:59Z')
    const retrying = await enqueueMany(env.deps, 'bulk', 'to_a', 30)
    await age(retrying, 'retrying', '2024-05-01T06:00:00Z')
    await age(await enqueueMany(env.deps, 'bulk', 'to_b', 40), 'failed', '2024-05-01T00:00:00Z')
    await age(await enqueueMany(env.deps, 'other', 'to_a', 40), 'failed', '2024-05-01T00:00:00Z')
    await env.queue.drain()

    const pool = createPool(env.db.url, 2)
    const counter = countStatements(pool)
    const out: string[] = []
    try {
      const code = await eventsCommand(
        { pool, signals: () => env.deps.signals },
        ['retry', '--project', 'bulk', '--target', 'a', '--since', '2024-05-01', '--until', '2024-05-02T00:00:00Z'],
        { out: s => out.push(s), err: s => out.push(s) },
      )
      expect(code).toBe(0)
      expect(counter.count()).toBe(1)
    } finally {
      await pool.end()
    }
    expect(out).toEqual(['10000 failed event(s) of bulk made due now', 'signalled project bulk'])
    expect(await env.queue.drain()).toEqual([{ project: 'bulk' }])

    // History kept (attempts and log), state as a single retry sets it, due now; the rest as it was.
    expect(await census('bulk')).toEqual([
      { target: 'a', state: 'retrying', intact: true, due: false, n: 30 },
      { target: 'a', state: 'retrying', intact: true, due: true, n: 10_000 },
      { target: 'a', state: 'failed', intact: true, due: false, n: 100 },
      { target: 'b', state: 'failed', intact: true, due: false, n: 40 },
    ])
    expect(await census('other')).toEqual([{ target: 'a', state: 'failed', intact: true, due: false, n: 40 }])
    const { rows } = await env.deps.db.query(
      `SELECT count(*)::int AS n FROM actions_event WHERE id = ANY($1) AND state = 'retrying' AND resolved_at IS NULL`,
      [inRange],
    )
    expect(rows[0]?.n).toBe(10_000)
  })

  it('stops matching events (retrying ones with --state retrying) without a signal, and counts what it changed', async () => {
    await schemaFor(env.deps, 'halt', { a: { url: 'http://127.0.0.1:9' }, b: { url: 'http://127.0.0.1:9' } })
    await age(await enqueueMany(env.deps, 'halt', 'to_a', 20), 'retrying', '2024-05-01T00:00:00Z')
    await age(await enqueueMany(env.deps, 'halt', 'to_a', 5), 'failed', '2024-05-01T00:00:00Z')
    await age(await enqueueMany(env.deps, 'halt', 'to_b', 7), 'retrying', '2024-05-01T00:00:00Z')
    await env.queue.drain()
    const res = await run('events', 'stop', '--project=halt', '--state', 'retrying', '--target', 'a')
    expect(res).toMatchObject({ code: 0, out: '20 retrying event(s) of halt stopped', err: '' })
    expect(await env.queue.drain()).toEqual([])
    expect(await census('halt')).toEqual([
      { target: 'a', state: 'failed', intact: true, due: false, n: 5 },
      { target: 'a', state: 'stopped', intact: true, due: false, n: 20 },
      { target: 'b', state: 'retrying', intact: true, due: false, n: 7 },
    ])
    // Without --target: the whole project's failed events.
    expect((await run('events', 'stop', '--project', 'halt')).out).toBe('5 failed event(s) of halt stopped')
  })

  it('takes the oldest first up to --limit and says when the limit was reached; an empty match sends no signal', async () => {
    await schemaFor(env.deps, 'lim', { a: { url: 'http://127.0.0.1:9' } })
    const ids = await enqueueMany(env.deps, 'lim', 'to_a', 10)
    await age(ids, 'failed', '2024-05-01T00:00:00Z')
    await env.queue.drain()
    const res = await run('events', 'retry', '--project', 'lim', '--limit', '4')
    expect(res.out).toBe('4 failed event(s) of lim made due now (limit 4 reached: run again for the rest)\nsignalled project lim')
    const { rows } = await env.deps.db.query<{ id: string }>(
      `SELECT id FROM actions_event WHERE project = 'lim' AND state = 'retrying' ORDER BY created_at`,
    )
    expect(rows.map(r => r.id)).toEqual(ids.slice(0, 4))
    await env.queue.drain()
    expect((await run('events', 'retry', '--project', 'nobody')).out).toBe('0 failed event(s) of nobody made due now')
    expect(await env.queue.drain()).toEqual([])
  })

  it('rejects bad bulk arguments as usage errors, and keeps the single-id forms strict', async () => {
    for (const argv of [
      ['events', 'retry', '--project'],
      ['events', 'retry', '--project', ''],
      ['events', 'retry', '--target', 'a'],
      ['events', 'retry', '--project', 'p', '--state', 'processing'],
      ['events', 'retry', '--project', 'p', '--since', 'yesterday'],
      ['events', 'retry', '--project', 'p', '--since', '2024-05-01T00:00:00'],
      ['events', 'retry', '--project', 'p', '--since', '2024-05-02', '--until', '2024-05-01'],
      ['events', 'retry', '--project', 'p', '--limit', String(MAX_BULK_EVENTS + 1)],
      ['events', 'retry', '00000000-0000-4000-8000-000000000000', '--project', 'p', '--target', 'a'],
      ['events', 'stop', '00000000-0000-4000-8000-000000000000', '--state', 'failed'],
      ['events', 'due', 'p', '--project', 'p'],
      ['events', 'retry', '--project', 'p', '--frob'],
    ]) {
      const res = await run(...argv)
      expect(res.code, argv.join(' ')).toBe(2)
      expect(res.err, argv.join(' ')).toContain('Usage: actions')
    }
  })
})
