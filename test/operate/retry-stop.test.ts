// Retry and stop respect the event's state, the same through every door (REST, GraphQL, the CLI),
// because all three call lib/operate/: a retry while the event is being delivered is refused (it
// used to start a second delivery beside the first), a delivered or stopped event is retried only
// with force, and a bulk form counts what it skipped.
import { describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/dispatch.js'
import { adminRoutes } from '../../lib/admin/api.js'
import { createRouter } from '../../lib/admin/router.js'
import { RETRYABLE, RETRYABLE_WITH_FORCE } from '../../lib/operate/retry.js'
import { STOPPABLE } from '../../lib/operate/stop.js'
import { runCli } from '../helpers/cli.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { useHarness } from '../helpers/harness.js'
import { createContext, sqsEvent } from '../helpers/lambda.js'
import { until } from '../helpers/wait.js'

const env = useHarness({ config: { DISPATCH_TIME_MARGIN_MS: '1000', BREAKER_FAILURES: '0' }, receiver: true, project: 'op' })
const dispatch = createHandler(() => env.deps)
const router = createRouter(adminRoutes())

async function rest(method: string, path: string, body?: unknown) {
  const res = await router(
    env.deps,
    { method, path, query: new URLSearchParams(), headers: {}, body: body === undefined ? '' : JSON.stringify(body) },
    { iamSigned: true },
  )
  return { status: res.status, json: res.body ? (JSON.parse(res.body) as Record<string, unknown>) : {} }
}

async function gql(query: string) {
  const res = await rest('POST', `/actions/${env.project}`, { query })
  return res.json as {
    data?: Record<string, { ok: boolean } | null> | null
    errors?: Array<{ message: string; extensions?: { code?: string } }>
  }
}

const cli = (...args: string[]) => runCli(env.cliEnv(), ['events', ...args])
const stateOf = async (id: string) =>
  (await env.deps.db.query<{ state: string }>('SELECT state FROM actions_event WHERE id = $1', [id])).rows[0]?.state
const setState = (id: string, state: string) =>
  env.deps.db.query(`UPDATE actions_event SET state = $2::actions_event_state, resolved_at = now() WHERE id = $1`, [id, state])

describe('the rule', () => {
  it('retries created, retrying and failed events; with force also succeed and stopped; never processing', () => {
    expect([...RETRYABLE].sort()).toEqual(['created', 'failed', 'retrying'])
    expect([...RETRYABLE_WITH_FORCE].sort()).toEqual(['created', 'failed', 'retrying', 'stopped', 'succeed'])
    expect(RETRYABLE_WITH_FORCE).not.toContain('processing')
    expect([...STOPPABLE].sort()).toEqual(['created', 'failed', 'processing', 'retrying'])
  })
})

describe('a retry while the event is being delivered', () => {
  it('is refused with 409 (REST), CONFLICT (GraphQL) and exit 1 (CLI), and the event is delivered once', async () => {
    let release: () => void = () => {}
    const held = new Promise<void>(resolve => (release = resolve))
    env.rx.respond(async (_, res) => {
      await held
      res.end()
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url } })
    const [id = ''] = await enqueueMany(env.deps, env.project, 'to_t', 1)
    const first = dispatch(sqsEvent(JSON.stringify({ project: env.project })), createContext())
    await until('the receiver holds the first delivery', () => env.rx.requests.length === 1)
    expect(await stateOf(id)).toBe('processing')

    const refused = await rest('POST', `/v1/projects/${env.project}/events/${id}/retry`, { force: true })
    expect(refused.status).toBe(409)
    expect(refused.json['detail']).toMatch(/being delivered \(state processing\)/)
    const viaGraphql = await gql(`mutation { retryEvent(id: "${id}", force: true) { ok } }`)
    expect(viaGraphql.errors?.[0]?.extensions?.code).toBe('CONFLICT')
    expect(viaGraphql.errors?.[0]?.message).toMatch(/being delivered/)
    const viaCli = await cli('retry', id, '--force')
    expect(viaCli.code).toBe(1)
    expect(viaCli.err).toMatch(/retry refused: the event is being delivered/)

    // A second dispatcher finds nothing due: the refused retries made nothing due.
    await dispatch(sqsEvent(JSON.stringify({ project: env.project })), createContext())
    release()
    await first
    expect(env.rx.requests).toHaveLength(1)
    expect(await stateOf(id)).toBe('succeed')
  })
})

describe('a delivered or stopped event', () => {
  it('is retried only with force, the same through REST, GraphQL and the CLI', async () => {
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url } })
    const ids = await enqueueMany(env.deps, env.project, 'to_t', 6)
    const [a = '', b = '', c = '', d = '', e = '', f = ''] = ids
    for (const [id, state] of [
      [a, 'succeed'],
      [b, 'stopped'],
      [c, 'succeed'],
      [d, 'stopped'],
      [e, 'succeed'],
      [f, 'stopped'],
    ] as const)
      await setState(id, state)

    for (const id of [a, b]) {
      const refused = await rest('POST', `/v1/projects/${env.project}/events/${id}/retry`)
      expect(refused.status).toBe(409)
      expect(refused.json['detail']).toMatch(/with force/)
      expect((await rest('POST', `/v1/projects/${env.project}/events/${id}/retry`, { force: true })).status).toBe(200)
      expect(await stateOf(id)).toBe('created')
    }
    for (const id of [c, d]) {
      expect((await gql(`mutation { retryEvent(id: "${id}") { ok } }`)).errors?.[0]?.extensions?.code).toBe('CONFLICT')
      expect((await gql(`mutation { retryEvent(id: "${id}", force: true) { ok } }`)).data).toEqual({ retryEvent: { ok: true } })
      expect(await stateOf(id)).toBe('created')
    }
    for (const id of [e, f]) {
      const refused = await cli('retry', id)
      expect(refused.code).toBe(1)
      expect(refused.err).toMatch(/retry refused: .*with force/)
      expect((await cli('retry', id, '--force')).code).toBe(0)
      expect(await stateOf(id)).toBe('created')
    }
    expect((await cli('stop', a, '--force')).code).toBe(2)
    // An unknown id stays what it was: 404, ok false, an error naming it.
    const unknown = '00000000-0000-4000-8000-00000000abcd'
    expect((await rest('POST', `/v1/projects/${env.project}/events/${unknown}/retry`)).status).toBe(404)
    expect((await gql(`mutation { retryEvent(id: "${unknown}") { ok } }`)).data).toEqual({ retryEvent: { ok: false } })
  })

  it('is not stopped: 409, CONFLICT and exit 1 for succeed and stopped; a failed one is stopped', async () => {
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url } })
    const [a = '', b = '', c = ''] = await enqueueMany(env.deps, env.project, 'to_t', 3)
    await setState(a, 'succeed')
    await setState(b, 'stopped')
    await setState(c, 'failed')
    for (const id of [a, b]) {
      expect((await rest('POST', `/v1/projects/${env.project}/events/${id}/stop`)).status).toBe(409)
      expect((await gql(`mutation { stopEvent(id: "${id}") { ok } }`)).errors?.[0]?.extensions?.code).toBe('CONFLICT')
      expect((await cli('stop', id)).err).toMatch(/stop refused/)
    }
    expect(await stateOf(a)).toBe('succeed')
    expect((await rest('POST', `/v1/projects/${env.project}/events/${c}/stop`)).status).toBe(200)
    expect(await stateOf(c)).toBe('stopped')
  })
})

describe('a bulk retry', () => {
  it('counts an event claimed between its pick and its update as skipped, and leaves it to its delivery', async () => {
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url } })
    const [a = '', b = ''] = await enqueueMany(env.deps, env.project, 'to_t', 2)
    await env.deps.db.query(
      `UPDATE actions_event SET state = 'failed', resolved_at = now(), failed_at = now() WHERE id = ANY($1::uuid[])`,
      [[a, b]],
    )
    // A claim of `a` holds its row lock while the bulk statement runs: the bulk picks it as failed,
    // waits for the lock, and finds it processing.
    const claim = await env.deps.db.connect()
    try {
      await claim.query('BEGIN')
      await claim.query(`UPDATE actions_event SET state = 'processing', lease_until = now() + interval '1 minute' WHERE id = $1`, [a])
      const bulk = rest('POST', `/v1/projects/${env.project}/events/retry`, {})
      await until('the bulk statement waits for the claimed row', async () => {
        const { rows } = await env.deps.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%picked%'`,
        )
        return (rows[0]?.n ?? 0) > 0
      })
      await claim.query('COMMIT')
      const res = await bulk
      expect(res.status).toBe(200)
      expect(res.json).toMatchObject({ matched: 2, changed: 1, skipped: 1, limitReached: false })
    } finally {
      claim.release()
    }
    expect(await stateOf(a)).toBe('processing')
    expect(await stateOf(b)).toBe('created')
  })
})
