import { describe, expect, it } from 'vitest'
import { drainProject } from '../../lib/dispatch/drain.js'
import { parseRetryAfter } from '../../lib/delivery/response.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { eventIdsOf } from '../helpers/receiver.js'
import { watchClaims } from '../helpers/statements.js'

const env = useHarness({ config: { LEASE_MARGIN_MS: '1000' }, receiver: true, project: 'ra' })
const HOUR_S = 3600

/** Delivers one event to a receiver answering `status` with `Retry-After: value`; returns seconds until it is due again (database clock). */
async function delayAfter(status: number, value: string): Promise<number> {
  env.rx.respond((_, res) => {
    res.writeHead(status, { 'retry-after': value })
    res.end()
  })
  await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 10, initialRepeatIntervalMs: 1000 } })
  const [id] = await enqueueMany(env.deps, env.project, 'to_t', 1)
  await drainProject(env.deps, env.project, FOREVER)
  const { rows } = await env.deps.db.query(
    'SELECT state, num_retries, extract(epoch FROM visible_at - now())::float8 AS s FROM actions_event WHERE id = $1',
    [id],
  )
  expect(rows[0]).toMatchObject({ state: 'retrying', num_retries: 1 })
  return Number(rows[0].s)
}

const httpDate = (d: Date) => d.toUTCString()

describe('Retry-After', () => {
  it('delays the next attempt of a 429 at least the seconds asked', async () => {
    expect(await delayAfter(429, '120')).toBeGreaterThanOrEqual(119)
  })

  it('honours an HTTP date on a 503', async () => {
    const { rows } = await env.deps.db.query('SELECT now() AS t')
    const at = new Date(rows[0].t.getTime() + 300_000)
    expect(await delayAfter(503, httpDate(at))).toBeGreaterThanOrEqual(298)
  })

  it.each([
    ['a huge delta', '1000000000000'],
    ['a date in year 9999', 'Fri, 31 Dec 9999 23:59:59 GMT'],
  ])('caps %s at RETRY_AFTER_MAX_MS', async (_, value) => {
    const s = await delayAfter(429, value)
    expect(s).toBeGreaterThan(HOUR_S - 60)
    expect(s).toBeLessThanOrEqual(HOUR_S)
  })

  it('ignores a malformed value and a Retry-After on other statuses', async () => {
    expect(await delayAfter(429, 'soon')).toBeLessThanOrEqual(1)
    env.nextProject()
    expect(await delayAfter(500, '120')).toBeLessThanOrEqual(1)
  })

  it('parses delta-seconds and the three HTTP date forms, and nothing else', () => {
    expect(parseRetryAfter('120')).toEqual({ delayMs: 120_000 })
    const at = { at: new Date(Date.UTC(1994, 10, 6, 8, 49, 37)) }
    expect(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT')).toEqual(at)
    expect(parseRetryAfter('Sunday, 06-Nov-94 08:49:37 GMT')).toEqual({ at: new Date(Date.UTC(2094, 10, 6, 8, 49, 37)) })
    expect(parseRetryAfter('Sun Nov  6 08:49:37 1994')).toEqual(at)
    for (const bad of ['', '-5', '1.5', 'soon', 'Sun, 31 Feb 1994 08:49:37 GMT', '9'.repeat(100)])
      expect(parseRetryAfter(bad)).toBeUndefined()
  })
})

describe('Retry-After on the whole target', () => {
  it('holds every batch of the target for the time asked, spends no attempt on them, and leaves the other target alone', async () => {
    const arrivals: Array<{ path: string; at: number; ids: string[] }> = []
    const seen = watchClaims(env.deps.db)
    let refusedAt = 0
    let refused = () => {}
    const wasRefused = new Promise<void>(resolve => {
      refused = resolve
    })
    env.rx.respond((req, res) => {
      arrivals.push({ path: req.path, at: Date.now(), ids: eventIdsOf(req) })
      if (req.path === '/a' && refusedAt === 0) {
        refusedAt = Date.now()
        refused()
        res.writeHead(429, { 'retry-after': '3' })
        res.end()
        return
      }
      // Slow enough that B is still being delivered while A is held.
      setTimeout(() => res.end(), req.path === '/b' ? 100 : 0)
    })
    await schemaFor(env.deps, env.project, { a: { url: env.rx.url + '/a' }, b: { url: env.rx.url + '/b' } })
    const a = await enqueueMany(env.deps, env.project, 'to_a', 20)
    await enqueueMany(env.deps, env.project, 'to_b', 20, 100)
    // The drain that got the 429 holds the target at once. A second drain, started once the hold is
    // recorded, learns it from the database. (One already running when the 429 came may still send
    // batches it had claimed before the record: a Retry-After cannot recall those.)
    const first = drainProject(env.deps, env.project, FOREVER)
    await wasRefused
    const heldBy = Date.now() + 5_000
    while (
      !(
        await env.deps.db.query(`SELECT 1 FROM actions_target_health WHERE project = $1 AND target = 'a' AND hold_until > now()`, [
          env.project,
        ])
      ).rowCount
    ) {
      if (Date.now() > heldBy) throw new Error('timed out: the hold of target a was never recorded')
      await new Promise(r => setTimeout(r, 10))
    }
    const heldSeenAt = Date.now()
    await Promise.all([first, drainProject(env.deps, env.project, FOREVER)])
    const deadline = Date.now() + 15_000
    while (
      (await env.deps.db.query(`SELECT count(*)::int AS n FROM actions_event WHERE project = $1 AND state = 'succeed'`, [env.project]))
        .rows[0].n < 40
    ) {
      if (Date.now() > deadline)
        throw new Error(
          `timed out: ${JSON.stringify((await env.deps.db.query('SELECT target, state, num_retries, visible_at > now() AS later, count(*)::int AS n FROM actions_event WHERE project = $1 GROUP BY 1, 2, 3, 4', [env.project])).rows)} ${JSON.stringify((await env.deps.db.query('SELECT * FROM actions_target_health WHERE project = $1', [env.project])).rows)}`,
        )
      await drainProject(env.deps, env.project, FOREVER)
      await new Promise(r => setTimeout(r, 100))
    }
    expect(refusedAt).toBeGreaterThan(0)
    // During the 3 s asked for, A gets only batches claimed before the hold was seen recorded (a busy
    // machine may send those late): no claim sent once the hold was in the database took an A event.
    const claimedBefore = new Set(seen.claims().flatMap(c => (c.sentAt < heldSeenAt ? c.ids : [])))
    const early = arrivals.filter(r => r.path === '/a' && r.at > refusedAt && r.at < refusedAt + 2_950)
    expect(early.flatMap(r => r.ids).filter(id => !claimedBefore.has(id))).toEqual([])
    expect(arrivals.filter(r => r.path === '/a' && r.at >= refusedAt + 2_950).length).toBeGreaterThan(0)
    // B was not held: it was delivered during A's hold.
    expect(arrivals.filter(r => r.path === '/b' && r.at > refusedAt + 100 && r.at < refusedAt + 2_950).length).toBeGreaterThan(0)
    // Only the refused event spent an attempt on the 429.
    const { rows } = await env.deps.db.query<{ n: number; tries: number }>(
      `SELECT num_retries AS tries, count(*)::int AS n FROM actions_event WHERE id = ANY($1) GROUP BY 1 ORDER BY 1`,
      [a],
    )
    expect(rows).toEqual([
      { tries: 1, n: 19 },
      { tries: 2, n: 1 },
    ])
  })
})
