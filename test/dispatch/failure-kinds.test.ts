// Three kinds of failed attempt, through the real dispatch path: a target that
// answers 401 is misconfigured (paused for an operator, never probed, its events kept), one that
// rejects an event (422, a `failures` entry) fails that event after its attempts and is never paused.
import { describe, expect, it } from 'vitest'
import { main } from '../../lib/cli/main.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { DESTINATION_NOT_ALLOWED_CODE } from '../../lib/delivery/egress.js'
import { EGRESS_REFUSED_CODE, failureKind, networkKind, statusKind } from '../../lib/kinds.js'
import { enqueueMany, schemaFor, states, targetHealth } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { eventIdsOf, json } from '../helpers/receiver.js'

const env = useHarness({
  config: { DISPATCH_CONCURRENCY: '1', BREAKER_FAILURES: '2', BREAKER_PROBE_MS: '200' },
  receiver: true,
  project: 'kinds',
})

describe('the kind of a failed attempt', () => {
  it('is down for 5xx, 408, 429 and network trouble, misconfigured for 3xx, 401, 403, 404, 405, 407, 410 and bad certificates, rejected for other 4xx', () => {
    expect([500, 503, 408, 429].map(statusKind)).toEqual(['down', 'down', 'down', 'down'])
    expect([301, 302, 308, 401, 403, 404, 405, 407, 410].map(statusKind)).toEqual(Array(9).fill('misconfigured'))
    expect([400, 409, 413, 422].map(statusKind)).toEqual(['rejected', 'rejected', 'rejected', 'rejected'])
    expect([
      networkKind('ECONNREFUSED'),
      networkKind(undefined),
      networkKind('CERT_HAS_EXPIRED'),
      networkKind('ERR_TLS_CERT_ALTNAME_INVALID'),
    ]).toEqual(['down', 'down', 'misconfigured', 'misconfigured'])
    // The egress guard's refusal: no request was made, the URL points where it may not.
    expect(EGRESS_REFUSED_CODE).toBe(DESTINATION_NOT_ALLOWED_CODE)
    expect(networkKind(DESTINATION_NOT_ALLOWED_CODE)).toBe('misconfigured')
    // An outcome without a kind (a caller from before kinds) is read by its status, and as down without one.
    expect([failureKind({ ok: false, errorMessage: 'x' }), failureKind({ ok: false, code: 401, errorMessage: 'x' })]).toEqual([
      'down',
      'misconfigured',
    ])
  })
})

describe('a misconfigured target', () => {
  it('answering 401 pauses for an operator after the threshold, is never probed, keeps its events, and delivers each once after resume', async () => {
    let fixed = false
    const delivered = new Map<string, number>()
    env.rx.respond((req, res) => {
      if (!fixed) {
        res.statusCode = 401
        res.end()
        return
      }
      for (const id of eventIdsOf(req)) delivered.set(id, (delivered.get(id) ?? 0) + 1)
      res.end()
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 2, initialRepeatIntervalMs: 1 } })
    const ids = await enqueueMany(env.deps, env.project, 'to_t', 4)
    for (let i = 0; i < 20 && !(await targetHealth(env.deps.db, env.project, 't'))?.paused_at; i++) {
      await drainProject(env.deps, env.project, FOREVER)
      await new Promise(r => setTimeout(r, 5))
    }
    expect(await targetHealth(env.deps.db, env.project, 't')).toMatchObject({
      paused_reason: 'misconfigured',
      pause_detail: '401',
      probe_at: null,
    })
    // No probe: drains long after BREAKER_PROBE_MS send nothing more.
    const sent = env.rx.requests.length
    await new Promise(r => setTimeout(r, 400))
    for (let i = 0; i < 3; i++) await drainProject(env.deps, env.project, FOREVER)
    expect(env.rx.requests.length).toBe(sent)
    // Its events wait, none failed, although some had their maxAttempts.
    expect([...(await states(env.deps, env.project)).values()].every(s => s.state !== 'failed')).toBe(true)

    const out: string[] = []
    const run = (...argv: string[]) => main(argv, { DATABASE_URL: env.db.url }, { out: s => out.push(s), err: s => out.push(s) })
    expect(await run('targets', 'list', env.project)).toBe(0)
    expect(out.join('\n')).toMatch(/^t paused \(misconfigured \(401\)\) since .*no probe: waits for "targets resume"/m)
    fixed = true
    expect(await run('targets', 'resume', env.project, 't')).toBe(0)
    for (let i = 0; i < 10 && delivered.size < ids.length; i++) await drainProject(env.deps, env.project, FOREVER)
    expect([...delivered.keys()].sort()).toEqual([...ids].sort())
    expect([...delivered.values()].every(v => v === 1)).toBe(true)
  })
})

describe('a receiver that rejects an event', () => {
  it('answering 422 for one event fails it after its attempts, never pauses the target, and delivers the others', async () => {
    let bad = ''
    env.rx.respond((req, res) => {
      res.statusCode = eventIdsOf(req).includes(bad) ? 422 : 200
      res.end()
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 3, initialRepeatIntervalMs: 1 } })
    const ids = await enqueueMany(env.deps, env.project, 'to_t', 5)
    bad = ids[2] ?? ''
    for (let i = 0; i < 20; i++) {
      await drainProject(env.deps, env.project, FOREVER)
      if ([...(await states(env.deps, env.project)).values()].every(s => s.state === 'succeed' || s.state === 'failed')) break
      await new Promise(r => setTimeout(r, 10))
    }
    const rows = await states(env.deps, env.project)
    expect(rows.get(bad)).toMatchObject({ state: 'failed', num_retries: 3 })
    expect(ids.filter(id => id !== bad).map(id => rows.get(id)?.state)).toEqual(['succeed', 'succeed', 'succeed', 'succeed'])
    expect(await targetHealth(env.deps.db, env.project, 't')).toBeUndefined()
  })

  it('naming an event in `failures` with "retry": false fails it after one attempt', async () => {
    let first = true
    env.rx.respond((req, res) => {
      const [x] = eventIdsOf(req)
      if (first) {
        first = false
        json(res, 200, { failures: [{ eventId: x, error: 'nope', retry: false }] })
        return
      }
      res.end()
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 5, initialRepeatIntervalMs: 1 } })
    const [x, y] = await enqueueMany(env.deps, env.project, 'to_t', 2)
    await drainProject(env.deps, env.project, FOREVER)
    const rows = await states(env.deps, env.project)
    expect(rows.get(x ?? '')).toMatchObject({ state: 'failed', num_retries: 1, log: [{ ok: false, code: 200, errorMessage: 'nope' }] })
    expect(rows.get(y ?? '')).toMatchObject({ state: 'succeed' })
  })
})
