// The operator's view of target health: list, pause, resume, against a real
// database and the SQS emulator. Health rows the breaker would write are written here with SQL.
import { beforeEach, describe, expect, it } from 'vitest'
import { runCli } from '../helpers/cli.js'
import { useHarness } from '../helpers/harness.js'
import { schemaFor } from '../helpers/events.js'
import { storeSchema } from '../../lib/db/schemas.js'

const env = useHarness()
beforeEach(async () => {
  await env.deps.db.query('DELETE FROM actions_target_health; DELETE FROM actions_schema')
})

const db = () => env.deps.db
const runWith = (extra: NodeJS.ProcessEnv, ...argv: string[]) => runCli({ ...env.cliEnv(), ...extra }, argv)
const run = (...argv: string[]) => runWith({}, ...argv)
const health = async (project: string) =>
  (
    await db().query(
      'SELECT target, consecutive_failures, paused_reason, probe_at, paused_at IS NOT NULL AS paused FROM actions_target_health WHERE project = $1 ORDER BY target',
      [project],
    )
  ).rows

describe('targets list', () => {
  it('shows every target of the current schema: running, failing with its run, paused with reason, since and next probe', async () => {
    await schemaFor(env.deps, 'shop', {
      calm: { url: 'http://127.0.0.1:9' },
      flaky: { url: 'http://127.0.0.1:9' },
      down: { url: 'http://127.0.0.1:9' },
      gone: { url: 'http://127.0.0.1:9' },
    })
    await db()
      .query(`INSERT INTO actions_target_health (project, target, consecutive_failures, failing_since, paused_at, paused_reason, probe_at, probe_interval_ms) VALUES
      ('shop', 'flaky', 2, '2024-05-01T10:00:00Z', NULL, NULL, NULL, NULL),
      ('shop', 'down', 7, '2024-05-01T09:00:00Z', '2024-05-01T09:05:00Z', 'failures', '2024-05-01T09:06:00Z', 60000),
      ('shop', 'gone', 1, '2024-05-01T08:00:00Z', '2024-05-01T08:00:00Z', 'gone', NULL, NULL),
      ('shop', 'removed', 5, '2024-05-01T07:00:00Z', '2024-05-01T07:01:00Z', 'failures', '2024-05-01T07:02:00Z', 30000),
      ('blog', 'calm', 9, '2024-05-01T07:00:00Z', '2024-05-01T07:01:00Z', 'operator', NULL, NULL)`)
    const res = await run('targets', 'list', 'shop')
    expect(res).toMatchObject({ code: 0, err: '' })
    expect(res.out.split('\n')).toEqual([
      'calm running',
      'down paused (down) since 2024-05-01T09:05:00.000Z, next probe 2024-05-01T09:06:00.000Z; 7 failed batch(es) in a row since 2024-05-01T09:00:00.000Z',
      'flaky running, failing: 2 failed batch(es) in a row since 2024-05-01T10:00:00.000Z',
      'gone paused (misconfigured (410)) since 2024-05-01T08:00:00.000Z, no probe: waits for "targets resume"; 1 failed batch(es) in a row since 2024-05-01T08:00:00.000Z',
      'removed paused (down) since 2024-05-01T07:01:00.000Z, next probe 2024-05-01T07:02:00.000Z; 5 failed batch(es) in a row since 2024-05-01T07:00:00.000Z [not in the current schema]',
      '4 target(s), 3 paused',
    ])
  })
})

describe('targets pause and resume', () => {
  it('pauses a target for the operator (no probe), then resumes it: row cleared, project signalled', async () => {
    await schemaFor(env.deps, 'ops', { a: { url: 'http://127.0.0.1:9' }, b: { url: 'http://127.0.0.1:9' } })
    await db()
      .query(`INSERT INTO actions_target_health (project, target, consecutive_failures, failing_since, paused_at, paused_reason, probe_at, probe_interval_ms)
      VALUES ('ops', 'a', 6, now() - interval '1 hour', now() - interval '50 minutes', 'failures', now() + interval '5 minutes', 240000)`)
    const paused = await run('targets', 'pause', 'ops', 'a')
    expect(paused.code).toBe(0)
    expect(paused.out).toMatch(/^target a of ops paused \(operator\) since \S+Z; its events wait until "targets resume"$/)
    expect(await health('ops')).toEqual([{ target: 'a', consecutive_failures: 6, paused_reason: 'operator', probe_at: null, paused: true }])
    // A healthy target gets a row of its own.
    expect((await run('targets', 'pause', 'ops', 'b')).code).toBe(0)
    expect((await run('targets', 'list', 'ops')).out).toMatch(/^b paused \(operator\) since \S+, no probe: waits for "targets resume"$/m)
    expect(await env.queue.drain()).toEqual([])

    const resumed = await run('targets', 'resume', 'ops', 'a')
    expect(resumed).toMatchObject({ code: 0, err: '' })
    expect(resumed.out).toMatch(
      /^target a of ops resumed \(was paused \(operator\) since \S+, no probe: waits for "targets resume"; 6 failed batch\(es\) in a row since \S+\)\nsignalled project ops$/,
    )
    expect(await env.queue.drain()).toEqual([{ project: 'ops' }])
    expect((await health('ops')).map(h => h.target)).toEqual(['b'])
    expect((await run('targets', 'list', 'ops')).out.split('\n')[0]).toBe('a running')

    // Resuming a running target is harmless and still wakes the project.
    expect((await run('targets', 'resume', 'ops', 'a')).out).toBe('target a of ops was not paused\nsignalled project ops')
  })

  it('clears a paused row of a target no longer in the schema, and refuses unknown projects and targets with exit 1', async () => {
    await schemaFor(env.deps, 'p', { a: { url: 'http://127.0.0.1:9' } })
    await db().query(
      `INSERT INTO actions_target_health (project, target, consecutive_failures, paused_at, paused_reason) VALUES ('p', 'old', 3, now(), 'gone')`,
    )
    expect((await run('targets', 'resume', 'p', 'old')).code).toBe(0)
    expect(await health('p')).toEqual([])
    for (const argv of [
      ['targets', 'list', 'nope'],
      ['targets', 'pause', 'nope', 'a'],
      ['targets', 'pause', 'p', 'old'],
      ['targets', 'resume', 'p', 'zzz'],
    ]) {
      const res = await run(...argv)
      expect(res.code, argv.join(' ')).toBe(1)
      expect(res.err, argv.join(' ')).toMatch(/^Error: unknown (project "nope"|target "(old|zzz)" in project "p")$/)
    }
    expect(await health('p')).toEqual([])
    for (const argv of [
      ['targets'],
      ['targets', 'list'],
      ['targets', 'pause', 'p'],
      ['targets', 'list', 'p', 'a'],
      ['targets', 'frob', 'p', 'a'],
      ['targets', 'pause', 'p', 'a', '--force'],
    ]) {
      const res = await run(...argv)
      expect(res.code, argv.join(' ')).toBe(2)
      expect(res.err).toContain('Usage: actions')
    }
  })
})

describe('targets pause and resume with OPS_PROJECT', () => {
  const withOps = (...argv: string[]) => runWith({ OPS_PROJECT: 'pager' }, ...argv)
  /** The operational events enqueued into the ops project, oldest first. */
  const opsEvents = async () =>
    (
      await db().query<{ trigger: string; payload: { entity: string; values: Record<string, unknown> } }>(
        `SELECT trigger, payload::jsonb AS payload FROM actions_event WHERE project = 'pager' ORDER BY created_at, id`,
      )
    ).rows

  beforeEach(async () => {
    await db().query(`DELETE FROM actions_event WHERE project = 'pager'`)
    const trigger = (entity: string) => ({
      type: 'basic',
      name: entity.replace('.', '_'),
      entity,
      create: true,
      delete: false,
      update: false,
      target: 'hook',
    })
    await storeSchema(db(), 'pager', {
      targets: { hook: { type: 'webhook', name: 'hook', url: 'http://127.0.0.1:9' } },
      triggers: Object.fromEntries(['target.paused', 'target.resumed'].map(e => [e.replace('.', '_'), trigger(e)])),
    })
  })

  it('enqueues target.paused (reason operator) and target.resumed as the engine does, and signals the ops project', async () => {
    await schemaFor(env.deps, 'shop', { a: { url: 'http://127.0.0.1:9' } })
    const paused = await withOps('targets', 'pause', 'shop', 'a')
    expect(paused).toMatchObject({ code: 0, err: '' })
    expect(await opsEvents()).toEqual([
      {
        trigger: 'target_paused',
        payload: expect.objectContaining({
          operation: 'create',
          entity: 'target.paused',
          values: {
            project: 'shop',
            target: 'a',
            reason: 'operator',
            at: expect.stringMatching(/^\d{4}-/),
            pausedAt: expect.stringMatching(/^\d{4}-/),
          },
        }),
      },
    ])
    expect(await env.queue.drain()).toEqual([{ project: 'pager' }])

    const resumed = await withOps('targets', 'resume', 'shop', 'a')
    expect(resumed).toMatchObject({ code: 0, err: '' })
    const events = await opsEvents()
    expect(events).toHaveLength(2)
    expect(events[1]).toEqual({
      trigger: 'target_resumed',
      payload: expect.objectContaining({
        entity: 'target.resumed',
        values: { project: 'shop', target: 'a', at: expect.stringMatching(/^\d{4}-/) },
      }),
    })
    expect(await env.queue.drain()).toEqual(expect.arrayContaining([{ project: 'pager' }, { project: 'shop' }]))

    // Resuming a target that was not paused ends no pause: nothing to tell.
    expect((await withOps('targets', 'resume', 'shop', 'a')).code).toBe(0)
    expect(await opsEvents()).toHaveLength(2)
  })

  it("keeps the pause but exits 1, naming the key, when the configuration cannot build the engine's enqueue", async () => {
    await schemaFor(env.deps, 'shop', { a: { url: 'http://127.0.0.1:9' } })
    const res = await runWith({ OPS_PROJECT: 'pager', DB_POOL_MAX: 'many' }, 'targets', 'pause', 'shop', 'a')
    expect(res.code).toBe(1)
    expect(res.err).toMatch(
      /^the pause stands, but telling OPS_PROJECT \(target.paused\) failed: ConfigError: [^]*DB_POOL_MAX: expected a positive integer/,
    )
    expect(res.err).not.toContain('many')
    expect(await health('shop')).toEqual([expect.objectContaining({ target: 'a', paused_reason: 'operator' })])
    expect(await opsEvents()).toEqual([])
  })
})
