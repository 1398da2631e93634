import { describe, expect, it } from 'vitest'
import { drainProject, type DrainOptions } from '../../lib/dispatch/drain.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'

// Schemas stored before a limit existed (or under a larger MAX_TARGET_TIMEOUT_MS) reach dispatch
// unvalidated, so each one is written straight into actions_schema here, bypassing `schema set`.

// The defaults that matter: MAX_TARGET_TIMEOUT_MS 60000, DISPATCH_TIME_MARGIN_MS 5000.
const env = useHarness({ config: { LEASE_MARGIN_MS: '1000' }, receiver: true, project: 'held' })
const db = () => env.deps.db

/** Stores a schema version as raw JSON: targets `ok` (runnable) and `bad` (with `badOptions`), one trigger each. */
async function storeRaw(p: string, badOptions: Record<string, unknown>): Promise<Record<string, unknown>> {
  const schema = {
    targets: {
      ok: { type: 'webhook', name: 'ok', url: env.rx.url + '/ok', batchSize: 10, timeoutMs: 1000 },
      bad: { type: 'webhook', name: 'bad', url: env.rx.url + '/bad-secret-path', ...badOptions },
    },
    triggers: {
      to_ok: { type: 'basic', name: 'to_ok', target: 'ok', entity: 'Article', create: true, delete: false, update: false },
      to_bad: { type: 'basic', name: 'to_bad', target: 'bad', entity: 'Article', create: true, delete: false, update: false },
    },
  }
  await db().query(
    `INSERT INTO actions_schema (project, version, schema)
     SELECT $1, coalesce(max(version), 0) + 1, $2::jsonb FROM actions_schema WHERE project = $1`,
    [p, JSON.stringify(schema)],
  )
  return schema
}

/** Writes `count` due events for a target directly (enqueue would validate against the schema). */
async function insertEvents(p: string, target: string, count: number): Promise<string[]> {
  const { rows } = await db().query<{ id: string }>(
    `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
     SELECT gen_random_uuid(), $1, gen_random_uuid(), 1, $2, 'to_' || $2,
            jsonb_build_object('operation', 'create', 'entity', 'Article', 'id', i)
     FROM generate_series(1, $3::int) i RETURNING id`,
    [p, target, count],
  )
  return rows.map(r => r.id)
}

/** The rows of events as stored, for comparing before and after a drain. */
async function snapshot(ids: string[]) {
  const { rows } = await db().query(
    'SELECT id, state, num_retries, visible_at, last_state_change, log FROM actions_event WHERE id = ANY($1) ORDER BY id',
    [ids],
  )
  return rows
}

const heldCount = async (p: string) => {
  const m = (await env.deps.metrics.registry.getMetricsAsJSON()).find(x => x.name === 'contember_actions_targets_held_total')
  return m?.values.find(v => v.labels.contember_project === p)?.value ?? 0
}

/**
 * Plays the dispatch function for `ms` of wall time: every visible signal for the project starts one
 * drain, as the SQS event source would. Returns how many drains ran (a livelock runs hundreds).
 */
async function driveBySignals(p: string, opts: DrainOptions, ms: number): Promise<number> {
  await env.deps.signals.send(p)
  let drains = 0
  const end = Date.now() + ms
  while (Date.now() < end) {
    // Signals of other projects (delayed ones left by earlier tests) are not this project's drains.
    for (const signal of await env.queue.drain()) {
      if (JSON.stringify(signal) !== JSON.stringify({ project: p })) continue
      await drainProject(env.deps, p, opts)
      drains++
    }
    await new Promise(r => setTimeout(r, 50))
  }
  return drains
}

const cases: Array<{ name: string; options: Record<string, unknown>; problem: RegExp }> = [
  { name: 'timeoutMs above MAX_TARGET_TIMEOUT_MS', options: { timeoutMs: 3_600_000 }, problem: /^timeoutMs: / },
  { name: 'maxAttempts 3e9', options: { maxAttempts: 3e9 }, problem: /^maxAttempts: / },
  { name: 'initialRepeatIntervalMs 3e9', options: { initialRepeatIntervalMs: 3e9 }, problem: /^initialRepeatIntervalMs: / },
  { name: 'batchSize 5000', options: { batchSize: 5000 }, problem: /^batchSize: / },
  { name: "payloadPath ['__proto__']", options: { payloadPath: ['__proto__'] }, problem: /^payloadPath: "__proto__"/ },
  { name: "payloadPath ['__proto__', 'events']", options: { payloadPath: ['__proto__', 'events'] }, problem: /^payloadPath: "__proto__"/ },
]

describe('a stored schema the engine cannot run', () => {
  for (const c of cases) {
    it(`holds back a target with ${c.name}: its events wait untouched, other targets and projects proceed`, async () => {
      await storeRaw(env.project, c.options)
      const bad = await insertEvents(env.project, 'bad', 3)
      const ok = await insertEvents(env.project, 'ok', 25)
      const before = await snapshot(bad)

      const logs = env.captureLogs()
      const res = await drainProject(env.deps, env.project, FOREVER).finally(() => logs.restore())
      expect(res).toMatchObject({ succeeded: 25, retried: 0, failedAfterAttempt: 0, failedUnknownTarget: 0, stop: 'idle', signal: 'none' })

      // The held target's events: not claimed, no attempt, no log entry, state and due time unchanged.
      expect(await snapshot(bad)).toEqual(before)
      expect(before.every(r => r.state === 'created' && r.num_retries === 0)).toBe(true)
      // Only the runnable target was called, each of its events once.
      expect(env.rx.requests.every(r => r.path === '/ok')).toBe(true)
      expect(env.rx.eventIds().sort()).toEqual([...ok].sort())
      // Warned once, naming the target and the problem, never its URL; counted once.
      const warnings = logs.records().filter(r => r.level === 'warn')
      expect(warnings).toHaveLength(1)
      expect(warnings[0]).toMatchObject({ project: env.project, target: 'bad', problems: [expect.stringMatching(c.problem)] })
      expect(logs.lines.join('\n')).not.toContain('bad-secret-path')
      expect(logs.lines.join('\n')).not.toContain(env.rx.url)
      expect(await heldCount(env.project)).toBe(1)
      // Nothing in the warm process was polluted.
      expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain('events')
      expect(({} as Record<string, unknown>).events).toBeUndefined()

      // No loop: the held events are no work for a signal, so signals lead to one drain, then none.
      expect(await driveBySignals(env.project, FOREVER, 2500)).toBe(1)
      expect(env.queue.delayed()).toEqual([])
      expect(await heldCount(env.project)).toBe(2)

      // Another project in the same process keeps working.
      const other = `${env.project}_neighbour`
      await schemaFor(env.deps, other, { t: { url: env.rx.url + '/neighbour' } })
      const theirs = await enqueueMany(env.deps, other, 'to_t', 3)
      expect(await drainProject(env.deps, other, FOREVER)).toMatchObject({ succeeded: 3, stop: 'idle' })
      expect(
        env.rx
          .eventIds()
          .filter(id => theirs.includes(id))
          .sort(),
      ).toEqual([...theirs].sort())

      // Fixing the schema lets the held events go out, each once, with their first attempt.
      await storeRaw(env.project, {})
      expect(await drainProject(env.deps, env.project, FOREVER)).toMatchObject({ succeeded: 3 })
      expect(
        env.rx
          .eventIds()
          .filter(id => bad.includes(id))
          .sort(),
      ).toEqual([...bad].sort())
      expect([...(await states(env.deps, env.project)).values()].every(s => s.state === 'succeed' && s.num_retries === 1)).toBe(true)
    })
  }

  it('holds back a target whose timeout does not fit the time left, delivers the rest, and never re-signals itself at once without progress', async () => {
    // Within MAX_TARGET_TIMEOUT_MS, but this function's invocations hold 20 s: 30 s + 5 s margin never fits.
    await storeRaw(env.project, { timeoutMs: 30_000 })
    const bad = await insertEvents(env.project, 'bad', 3)
    const ok = await insertEvents(env.project, 'ok', 25)
    const before = await snapshot(bad)
    const short: DrainOptions = { remainingMs: () => 20_000 }

    const logs = env.captureLogs()
    const res = await drainProject(env.deps, env.project, short).finally(() => logs.restore())
    // The runnable target went out in full; the slow one is left for an invocation with more time.
    expect(res).toMatchObject({ succeeded: 25, stop: 'time', signal: 'continue' })
    expect(env.rx.eventIds().sort()).toEqual([...ok].sort())
    expect(await snapshot(bad)).toEqual(before)
    const warnings = logs.records().filter(r => r.level === 'warn')
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatchObject({ target: 'bad', problems: [expect.stringMatching(/^timeoutMs: 30000 ms does not fit/)] })
    expect(await env.queue.drain()).toEqual([{ project: env.project }])

    // The next drain moves nothing: it leaves a delayed signal, not an immediate one.
    const again = await drainProject(env.deps, env.project, short)
    expect(again).toMatchObject({ succeeded: 0, batches: 0, stop: 'time', signal: { delaySeconds: 5 } })
    expect(await env.queue.drain()).toEqual([])
    expect(env.queue.delayed()).toEqual([{ body: { project: env.project }, delaySeconds: 5 }])
    // Driven by signals for a while: one drain per signal that becomes visible, no spinning.
    expect(await driveBySignals(env.project, short, 2500)).toBe(1)
    expect(await snapshot(bad)).toEqual(before)

    // An invocation with enough time delivers them, each once.
    expect(await drainProject(env.deps, env.project, FOREVER)).toMatchObject({ succeeded: 3 })
    expect(
      env.rx
        .eventIds()
        .filter(id => bad.includes(id))
        .sort(),
    ).toEqual([...bad].sort())
  })

  it('no longer stops before its first claim when the slowest target does not fit: faster targets go first', async () => {
    // Before, the slowest target decided for every claim: the drain stopped at once and re-signalled itself.
    await storeRaw(env.project, { timeoutMs: 60_000 })
    const ok = await insertEvents(env.project, 'ok', 5)
    const res = await drainProject(env.deps, env.project, { remainingMs: () => 30_000 })
    expect(res.succeeded).toBe(5)
    expect(env.rx.eventIds().sort()).toEqual([...ok].sort())
    // Nothing of the slow target is due, so no continuation is needed.
    expect(res).toMatchObject({ stop: 'time', signal: 'none' })
  })
})
