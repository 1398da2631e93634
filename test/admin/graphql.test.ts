// Upstream's GraphQL Actions API through graphqlRoute.handle, with real deps: the
// documents are the ones upstream's ActionsClient (`contember actions:*`) and the project templates'
// variable scripts send, and the answers are held against the CLI's.
import { describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/dispatch.js'
import { graphqlRoute } from '../../lib/admin/graphql.js'
import type { Principal, Role } from '../../lib/admin/types.js'
import { setVariables } from '../../lib/db/variables.js'
import { runCli } from '../helpers/cli.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'
import { useHarness } from '../helpers/harness.js'
import { createContext, sqsEvent } from '../helpers/lambda.js'

const env = useHarness({ config: { DISPATCH_TIME_MARGIN_MS: '1000', BREAKER_FAILURES: '0' }, receiver: true, project: 'gql' })
const dispatch = createHandler(() => env.deps)

// upstream's ActionsClient documents, as sent (tabs and all)
const FAILED_EVENTS = `query($offset: Int, $limit: Int) {
  failedEvents(args: { offset: $offset, limit: $limit }) {
  \tid
  \tcreatedAt
  \tlastStateChange
  \tvisibleAt
  \tnumRetries
  \tstate
  \ttarget
  \tpayload
  \tlog
  }
}`
const GET_EVENT = `query($id: UUID!) {
  event(id: $id) {
  \tid
  \tcreatedAt
  \tlastStateChange
  \tvisibleAt
  \tnumRetries
  \tstate
  \ttarget
  \tpayload
  \tlog
  }
}`
const RETRY_EVENT = `mutation($id: UUID!) {
  retryEvent(id: $id) {
  \tok
  }
}`
const STOP_EVENT = `mutation($id: UUID!) {
  stopEvent(id: $id) {
  \tok
  }
}`
const LIST_VARIABLES = `query {
  variables {
  \tname
  \tvalue
  }
}`
const SET_VARIABLES = `mutation($variables: [VariableInput!]!, $mode: SetVariablesMode) {
  setVariables(args: { variables: $variables, mode: $mode }) {
\tok
  }
  }`

type Answer = { data?: Record<string, unknown> | null; errors?: Array<{ message: string; extensions?: { code?: string } }> }

const token = (role: Role, project = env.project): Principal => ({ kind: 'token', tokenId: `t-${role}`, project, role })
const system: Principal = { kind: 'system' }

/** Sends `{ query, variables }` as upstream's GraphQlClient does, to the project of the URL; returns the status and the JSON answer. */
async function gql(principal: Principal, query: string, variables?: Record<string, unknown>, project = env.project) {
  const res = await graphqlRoute.handle({
    deps: env.deps,
    principal,
    params: { project },
    query: new URLSearchParams(),
    body: JSON.parse(JSON.stringify({ query, variables })),
  })
  return { status: res.status, ...(res.body as Answer) }
}

/** Makes `count` events of the project fail (one attempt against a 500), through the real dispatch. */
async function failed(project: string, count: number, body = ''): Promise<string[]> {
  env.rx.respond((_, res) => {
    res.statusCode = 500
    res.end(body)
  })
  await schemaFor(env.deps, project, { t: { url: env.rx.url, maxAttempts: 1 } })
  const ids = await enqueueMany(env.deps, project, 'to_t', count)
  await dispatch(sqsEvent(JSON.stringify({ project })), createContext())
  env.rx.respond((_, res) => {
    res.end()
  })
  return ids
}

const cliIds = (out: string) => out.split('\n').flatMap(line => /^([0-9a-f-]{36}) /.exec(line)?.[1] ?? [])
const rows = async (project: string) =>
  (await env.deps.db.query('SELECT name, value FROM actions_variable WHERE project = $1 ORDER BY name', [project])).rows

describe("upstream's documents against the CLI", () => {
  it('failedEvents returns the ids `events failed P --limit 100` prints, in its order, and the rest at offset 100', async () => {
    const ids = await failed(env.project, 120)
    // Events failed in one batch share last_state_change, and neither listing orders ties: spread them 1 ms apart.
    await env.deps.db.query(
      `UPDATE actions_event e SET last_state_change = e.last_state_change - r.n * interval '1 ms'
       FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM actions_event WHERE project = $1) r WHERE e.id = r.id AND e.project = $1`,
      [env.project],
    )
    const cli = await runCli(env.cliEnv(), ['events', 'failed', env.project, '--limit', '100'])
    expect(cli.code).toBe(0)
    const first = await gql(token('viewer'), FAILED_EVENTS, { limit: 100 })
    expect(first.status).toBe(200)
    expect(first.errors).toBeUndefined()
    const page = first.data?.failedEvents as Array<{ id: string; state: string; numRetries: number; log: unknown[] }>
    expect(cliIds(cli.out)).toHaveLength(100)
    expect(page.map(e => e.id)).toEqual(cliIds(cli.out))
    expect(page[0]).toMatchObject({ state: 'failed', numRetries: 1, log: [{ ok: false, code: 500 }] })
    const rest = (await gql(token('viewer'), FAILED_EVENTS, { offset: 100, limit: 100 })).data?.failedEvents as Array<{ id: string }>
    expect(new Set([...page, ...rest].map(e => e.id))).toEqual(new Set(ids))
    // no args at all: upstream's default page of 100
    expect((await gql(token('viewer'), FAILED_EVENTS)).data?.failedEvents).toHaveLength(100)
  })

  it('setVariables SET leaves the rows `variables set --mode set` leaves, and MERGE and APPEND_ONLY_MISSING as their modes do', async () => {
    const viaCli = env.project
    const viaApi = env.nextProject()
    for (const p of [viaCli, viaApi]) await setVariables(env.deps.db, p, { KEEP: 'keep-me', X: 'old-x' }, 'merge')
    const vars = [
      { name: 'X', value: 'new-x' },
      { name: 'Y', value: 'why' },
    ]
    for (const [cliMode, mode] of [
      ['append-only-missing', 'APPEND_ONLY_MISSING'],
      ['merge', 'MERGE'],
      ['set', 'SET'],
    ] as const) {
      const cli = await runCli(env.cliEnv(), ['variables', 'set', viaCli, ...vars.map(v => `${v.name}=${v.value}`), '--mode', cliMode])
      expect(cli.code).toBe(0)
      const res = await gql(token('deployer', viaApi), SET_VARIABLES, { mode, variables: vars }, viaApi)
      expect(res).toMatchObject({ status: 200, data: { setVariables: { ok: true } } })
      expect(await rows(viaApi)).toEqual(await rows(viaCli))
    }
    expect(await rows(viaApi)).toEqual([
      { name: 'X', value: 'new-x' },
      { name: 'Y', value: 'why' },
    ])
  })

  it("takes the templates' inline setVariables (no mode: MERGE) and upstream's SET of an empty list", async () => {
    await setVariables(env.deps.db, env.project, { OTHER: 'other' }, 'merge')
    const inline = `mutation { setVariables(args: { variables: [{ name: "apiKey", value: "k-123456" }, { name: "baseUrl", value: "http://127.0.0.1:1" }] }) { ok } }`
    expect((await gql(token('admin'), inline)).data).toEqual({ setVariables: { ok: true } })
    expect(await rows(env.project)).toEqual([
      { name: 'OTHER', value: 'other' },
      { name: 'apiKey', value: 'k-123456' },
      { name: 'baseUrl', value: 'http://127.0.0.1:1' },
    ])
    expect((await gql(token('admin'), SET_VARIABLES, { mode: 'SET', variables: [] })).data).toEqual({ setVariables: { ok: true } })
    expect(await rows(env.project)).toEqual([])
  })

  it("event(id), retryEvent and stopEvent act on the project's own event as the CLI does; another project's id is null and not ok", async () => {
    const own = env.project
    const [a, b] = await failed(own, 2)
    const shown = await gql(token('viewer'), GET_EVENT, { id: a })
    expect(shown.data?.event).toMatchObject({ id: a, state: 'failed', target: 't', numRetries: 1 })
    await env.queue.drain()
    expect((await gql(token('admin'), RETRY_EVENT, { id: a })).data).toEqual({ retryEvent: { ok: true } })
    expect(await env.queue.drain()).toEqual([{ project: env.project }])
    expect((await gql(token('admin'), STOP_EVENT, { id: b })).data).toEqual({ stopEvent: { ok: true } })
    expect(await env.queue.drain()).toEqual([])
    const now = await states(env.deps, env.project)
    expect([now.get(a ?? '')?.state, now.get(b ?? '')?.state]).toEqual(['retrying', 'stopped'])
    const other = env.nextProject()
    await schemaFor(env.deps, other, { t: { url: env.rx.url } })
    expect((await gql(token('admin', other), GET_EVENT, { id: a }, other)).data).toEqual({ event: null })
    expect((await gql(token('admin', other), RETRY_EVENT, { id: a }, other)).data).toEqual({ retryEvent: { ok: false } })
    expect((await gql(token('admin', other), STOP_EVENT, { id: b }, other)).data).toEqual({ stopEvent: { ok: false } })
    expect((await states(env.deps, own)).get(a ?? '')?.state).toBe('retrying')
  })

  it('eventsToProcess and eventsInProcessing list what `events due` and `events processing` list', async () => {
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url } })
    const ids = await enqueueMany(env.deps, env.project, 'to_t', 3)
    const due = await runCli(env.cliEnv(), ['events', 'due', env.project, '--limit', '100'])
    const toProcess = (await gql(token('viewer'), '{ eventsToProcess { id } }')).data?.eventsToProcess as Array<{ id: string }>
    expect(toProcess.map(e => e.id)).toEqual(cliIds(due.out))
    expect(new Set(toProcess.map(e => e.id))).toEqual(new Set(ids))
    await env.deps.db.query(
      `UPDATE actions_event SET state = 'processing', lease_until = now() + interval '1 minute' WHERE id = $1 AND project = $2`,
      [ids[0], env.project],
    )
    const processing = await runCli(env.cliEnv(), ['events', 'processing', env.project])
    const inProcessing = (await gql(token('viewer'), '{ eventsInProcessing { id state } }')).data?.eventsInProcessing
    expect(inProcessing).toEqual([{ id: ids[0], state: 'processing' }])
    expect(cliIds(processing.out)).toEqual([ids[0]])
  })
})

describe('processBatch', () => {
  it('sends the project exactly one signal', async () => {
    await env.queue.drain()
    const res = await gql(token('admin'), 'mutation { processBatch { ok } }')
    expect(res).toMatchObject({ status: 200, data: { processBatch: { ok: true } } })
    expect(await env.queue.drain()).toEqual([{ project: env.project }])
  })
})

describe('limits of the event listings', () => {
  it('takes limit 0 and 10000, refuses 10001, a negative offset and one past a million, naming the argument', async () => {
    await failed(env.project, 2)
    expect((await gql(token('viewer'), FAILED_EVENTS, { limit: 0 })).data?.failedEvents).toEqual([])
    expect((await gql(token('viewer'), FAILED_EVENTS, { limit: 10_000 })).data?.failedEvents).toHaveLength(2)
    expect((await gql(token('viewer'), FAILED_EVENTS, { offset: 1_000_000 })).data?.failedEvents).toEqual([])
    for (const [vars, path] of [
      [{ limit: 10_001 }, 'args.limit'],
      [{ offset: -1 }, 'args.offset'],
      [{ offset: 1_000_001 }, 'args.offset'],
    ] as const) {
      const res = await gql(token('viewer'), FAILED_EVENTS, vars)
      expect(res.status).toBe(400)
      expect(res.data).toBeNull()
      expect(res.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT')
      expect(res.errors?.[0]?.message).toContain(path)
    }
  })

  it('refuses a malformed id as bad input', async () => {
    const res = await gql(token('viewer'), GET_EVENT, { id: 'not-a-uuid' })
    expect(res.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' } })
    expect(res.errors?.[0]?.message).toContain('id')
  })
})
