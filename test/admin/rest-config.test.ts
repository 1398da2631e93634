// The REST routes of targets, the schema, variables and stats against a real database and
// the SQS emulator, every answer checked against the OpenAPI document; a canary variable value never
// appears in an answer or a log line.
import { randomUUID } from 'node:crypto'
import { beforeEach, describe, expect, it } from 'vitest'
import { restRoutes } from '../../lib/admin/rest.js'
import type { Principal, Route } from '../../lib/admin/types.js'
import { storeSchema } from '../../lib/db/schemas.js'
import { fetchVariables, setVariables } from '../../lib/db/variables.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { useHarness } from '../helpers/harness.js'
import { expectDocumented, routeOf } from '../helpers/openapi.js'

const CANARY = 'CANARY-v4lue-7f3a9c'
/** A literal header value of the schema: a secret a viewer may not read, though a receiver may quote it. */
const HEADER_CANARY = 'HEADER-literal-c4n4ry-55e1'
const env = useHarness({ project: 'cfg', config: { OPS_PROJECT: 'ops' } })
const system: Principal = { kind: 'system' }
const token = (role: 'viewer' | 'deployer' | 'admin'): Principal => ({ kind: 'token', tokenId: randomUUID(), project: env.project, role })

type Call = { principal?: Principal; params?: Record<string, string>; query?: Record<string, string>; body?: unknown }
const answers: string[] = []

/** Calls a handler as the router would after authorizing; checks the answer against the document and keeps it for the canary check. */
async function call(method: Route['method'], path: string, c: Call = {}) {
  const route = routeOf(restRoutes, method, path)
  const result = await route.handle({
    deps: env.deps,
    principal: c.principal ?? system,
    params: { project: env.project, ...c.params },
    query: new URLSearchParams(c.query),
    body: c.body,
  })
  expectDocumented(route, result)
  answers.push(JSON.stringify(result.body ?? null))
  return result
}

const P = '/v1/projects/:project'
const schema = () => schemaFor(env.deps, env.project, { a: { url: 'http://127.0.0.1:9' }, b: { url: 'http://127.0.0.1:9' } })

beforeEach(async () => {
  await env.deps.db.query('DELETE FROM actions_event')
  // OPS_PROJECT subscribes to the operator's pause and resume as an ordinary schema does.
  const trigger = (entity: string) => ({ type: 'basic', name: entity, entity, target: 'ops', create: true, delete: false, update: false })
  await storeSchema(env.deps.db, 'ops', {
    targets: { ops: { type: 'webhook', name: 'ops', url: 'http://127.0.0.1:9' } },
    triggers: { 'target.paused': trigger('target.paused'), 'target.resumed': trigger('target.resumed') },
  })
})

describe('targets', () => {
  it('lists every target’s health, pauses one (an ops event enqueued) and resumes it with a signal', async () => {
    await schema()
    await enqueueMany(env.deps, env.project, 'to_a', 3)
    await env.queue.drain()
    const before = await call('GET', `${P}/targets`, { principal: token('viewer') })
    expect(before.body).toMatchObject({
      targets: [
        { target: 'a', state: 'running', pause: null, due: 3 },
        { target: 'b', due: 0 },
      ],
    })

    const paused = await call('POST', `${P}/targets/:target/pause`, { params: { target: 'a' } })
    expect(paused.body).toMatchObject({ target: 'a', state: 'paused' })
    const listed = await call('GET', `${P}/targets`)
    expect(listed.body).toMatchObject({ targets: [{ target: 'a', state: 'paused', pause: { kind: 'operator', label: 'operator' } }, {}] })
    const { rows } = await env.deps.db.query("SELECT payload FROM actions_event WHERE project = 'ops'")
    expect(rows.map(r => r.payload.entity)).toEqual(['target.paused'])
    expect(rows[0]?.payload.values).toMatchObject({ project: env.project, target: 'a', reason: 'operator' })

    await env.queue.drain()
    const resumed = await call('POST', `${P}/targets/:target/resume`, { params: { target: 'a' } })
    expect(resumed.body).toEqual({ target: 'a', state: 'running', wasPaused: true, signalled: true })
    // The resume wakes the project; the ops event wakes OPS_PROJECT.
    const woken = (await env.queue.drain()).map(m => JSON.stringify(m)).sort()
    expect(woken).toEqual([JSON.stringify({ project: env.project }), JSON.stringify({ project: 'ops' })].sort())
    await expect(call('POST', `${P}/targets/:target/pause`, { params: { target: 'nope' } })).rejects.toThrow(/no such target/)
    await expect(call('POST', `${P}/targets/:target/pause`, { params: { target: 't'.repeat(256) } })).rejects.toThrow(/255 bytes/)
  })

  it('answers 404 for a project without a schema', async () => {
    await expect(call('GET', `${P}/targets`)).rejects.toMatchObject({ status: 404 })
  })
})

describe('schema', () => {
  it('stores a new version with PUT and answers it with GET; an invalid schema is a 400 problem', async () => {
    await schema()
    const current = await call('GET', `${P}/schema`, { principal: token('deployer') })
    expect(current.body).toMatchObject({ version: 1, schema: { targets: { a: { url: 'http://127.0.0.1:9' } } } })
    const body = { targets: { c: { type: 'webhook', name: 'c', url: 'http://127.0.0.1:9' } }, triggers: {} }
    expect((await call('PUT', `${P}/schema`, { body })).body).toEqual({ version: 2 })
    expect((await call('GET', `${P}/schema`)).body).toMatchObject({ version: 2, schema: { targets: { c: {} } } })
    const tooSlow = { targets: { c: { type: 'webhook', name: 'c', url: 'http://127.0.0.1:9', timeoutMs: 10_000_000 } }, triggers: {} }
    await expect(call('PUT', `${P}/schema`, { body: tooSlow })).rejects.toMatchObject({
      status: 400,
      detail: expect.stringMatching(/timeoutMs/),
    })
    await expect(call('GET', `${P}/schema`, { params: { project: 'unknown-project' } })).rejects.toMatchObject({ status: 404 })
  })
})

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

describe('variables', () => {
  it('sets (PUT), merges (PATCH), appends only missing, lists names and deletes, never answering or logging a value', async () => {
    const logs = env.captureLogs()
    try {
      const put = await call('PUT', `${P}/variables`, { principal: token('deployer'), body: { variables: { TOKEN: CANARY, OLD: 'x' } } })
      expect(put.body).toEqual({
        variables: [
          { name: 'OLD', updatedAt: expect.stringMatching(ISO) },
          { name: 'TOKEN', updatedAt: expect.stringMatching(ISO) },
        ],
      })
      const timeOf = async (name: string) =>
        (
          await env.deps.db.query<{ t: Date }>('SELECT updated_at AS t FROM actions_variable WHERE project = $1 AND name = $2', [
            env.project,
            name,
          ])
        ).rows[0]?.t
      const tokenSetAt = await timeOf('TOKEN')
      await call('PUT', `${P}/variables`, { body: { variables: { TOKEN: CANARY, KEPT: 'k' } } })
      // SET keeps a variable it repeats with the same value, change time included.
      expect(await timeOf('TOKEN')).toEqual(tokenSetAt)
      expect([...(await fetchVariables(env.deps.db, env.project)).keys()].sort()).toEqual(['KEPT', 'TOKEN'])
      await call('PATCH', `${P}/variables`, { body: { variables: { ADDED: 'a', KEPT: 'k2' } } })
      await call('PATCH', `${P}/variables`, { query: { mode: 'append-only-missing' }, body: { variables: { KEPT: 'no', NEW: 'n' } } })
      expect(Object.fromEntries(await fetchVariables(env.deps.db, env.project))).toEqual({
        ADDED: 'a',
        KEPT: 'k2',
        NEW: 'n',
        TOKEN: CANARY,
      })
      const listed = await call('GET', `${P}/variables`, { principal: token('viewer') })
      expect(listed.body).toEqual({
        variables: ['ADDED', 'KEPT', 'NEW', 'TOKEN'].map(name => ({ name, updatedAt: expect.stringMatching(ISO) })),
      })
      // A changed value moves its time; one appended-only-missing over it does not.
      expect((await timeOf('KEPT'))?.getTime()).toBeGreaterThan(tokenSetAt?.getTime() ?? Infinity)
      expect((await call('DELETE', `${P}/variables/:name`, { params: { name: 'NEW' } })).status).toBe(204)
      await expect(call('DELETE', `${P}/variables/:name`, { params: { name: 'NEW' } })).rejects.toMatchObject({ status: 404 })

      // Receiver text echoing the value and a literal header value, in an event's log: redacted in every answer.
      await schemaFor(env.deps, env.project, { a: { url: 'http://127.0.0.1:9', headers: { 'x-hook-key': HEADER_CANARY } } })
      const [id = ''] = await enqueueMany(env.deps, env.project, 'to_a', 1)
      const echo = `401 from receiver: bad token ${CANARY} ${HEADER_CANARY}`
      await env.deps.db.query(
        `UPDATE actions_event SET state = 'failed', resolved_at = now(), failed_at = now(), num_retries = 1, log = jsonb_build_array(jsonb_build_object('ok', false, 'errorMessage', $2::text, 'response', $2::text))
         WHERE id = $1`,
        [id, echo],
      )
      for (const principal of [token('viewer'), system]) {
        const shown = await call('GET', `${P}/events/:id`, { principal, params: { id } })
        expect(shown.body).toMatchObject({
          lastError: '401 from receiver: bad token [redacted] [redacted]',
          log: [{ response: '401 from receiver: bad token [redacted] [redacted]' }],
        })
        await call('GET', `${P}/events`, { principal, query: { state: 'failed' } })
        await call('GET', `${P}/stats`, { principal })
        await call('GET', `${P}/targets`, { principal })
        await call('GET', `${P}/variables`, { principal })
      }
      await expect(call('PUT', `${P}/variables`, { body: { variables: { 'bad-name': CANARY } } })).rejects.toThrow()
      await expect(call('PUT', `${P}/variables`, { body: { variables: { ['N'.repeat(256)]: CANARY } } })).rejects.toThrow(/255 bytes/)
      await expect(call('PUT', `${P}/variables`, { query: { mode: 'set' }, body: { variables: {} } })).rejects.toThrow()
      expect(answers.length).toBeGreaterThan(15)
      // No route called here reads the schema (deployers and admins do): no answer holds the header value.
      expect(answers.filter(a => a.includes(CANARY) || a.includes(HEADER_CANARY))).toEqual([])
      expect(logs.lines.filter(l => l.includes(CANARY) || l.includes(HEADER_CANARY))).toEqual([])
    } finally {
      logs.restore()
    }
  })

  it('keeps a failed signal out of the answer and the log free of values', async () => {
    await setVariables(env.deps.db, env.project, { TOKEN: CANARY }, 'set')
    await schema()
    const [id = ''] = await enqueueMany(env.deps, env.project, 'to_a', 1)
    const logs = env.captureLogs()
    const broken = {
      ...env.deps,
      signals: { send: async () => Promise.reject(new Error(`queue refused ${CANARY}`)), sendMany: async () => {} },
    }
    try {
      const route = routeOf(restRoutes, 'POST', `${P}/events/:id/retry`)
      const res = await route.handle({
        deps: broken,
        principal: system,
        params: { project: env.project, id },
        query: new URLSearchParams(),
        body: undefined,
      })
      expectDocumented(route, res)
      expect(res.body).toEqual({ id, action: 'retry', signalled: false })
      expect(logs.lines.some(l => l.includes('Could not signal'))).toBe(true)
      expect(logs.lines.filter(l => l.includes(CANARY))).toEqual([])
    } finally {
      logs.restore()
    }
  })
})

describe('stats', () => {
  it('counts events by state, the due backlog and its oldest age, and the heartbeat', async () => {
    await schema()
    const ids = await enqueueMany(env.deps, env.project, 'to_a', 4)
    await env.deps.db.query(
      `UPDATE actions_event SET state = 'failed', resolved_at = now(), failed_at = now() WHERE id = ANY($1::uuid[])`,
      [ids.slice(0, 1)],
    )
    await env.deps.db.query(`UPDATE actions_event SET visible_at = now() - interval '90 seconds' WHERE id = ANY($1::uuid[])`, [
      ids.slice(1),
    ])
    const empty = await call('GET', `${P}/stats`, { principal: token('viewer') })
    expect(empty.body).toMatchObject({
      counts: { created: 3, failed: 1, succeed: 0 },
      due: 3,
      lastProgressAt: null,
      lastProgressAgeSeconds: null,
    })
    expect((empty.body as { oldestDueAgeSeconds: number }).oldestDueAgeSeconds).toBeGreaterThanOrEqual(89)
    await env.deps.db.query(`INSERT INTO actions_dispatch_progress (project, progressed_at) VALUES ($1, now() - interval '30 seconds')`, [
      env.project,
    ])
    const beat = await call('GET', `${P}/stats`)
    expect((beat.body as { lastProgressAgeSeconds: number }).lastProgressAgeSeconds).toBeGreaterThanOrEqual(29)
  })
})
