// Who may run which operation of the GraphQL Actions API, and where variable values may appear: only
// in `variables` answered to the project's admin or a system caller, never in any other answer nor in
// any log line.
import { describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/dispatch.js'
import { graphqlRoute } from '../../lib/admin/graphql.js'
import type { Principal, Role } from '../../lib/admin/types.js'
import { ProblemError } from '../../lib/admin/types.js'
import { createPool } from '../../lib/db/pool.js'
import { createSqsClient } from '../../lib/deps.js'
import { createSignals } from '../../lib/signals.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { useHarness } from '../helpers/harness.js'
import { createContext, sqsEvent } from '../helpers/lambda.js'

const env = useHarness({ config: { DISPATCH_TIME_MARGIN_MS: '1000', BREAKER_FAILURES: '0' }, receiver: true, project: 'acl' })
const dispatch = createHandler(() => env.deps)

type Answer = {
  data?: Record<string, unknown> | null
  errors?: Array<{ message: string; path?: string[]; extensions?: { code?: string } }>
}

const token = (role: Role, project = env.project): Principal => ({ kind: 'token', tokenId: `t-${role}`, project, role })

async function gql(principal: Principal, query: string, variables?: Record<string, unknown>, project = env.project) {
  const res = await graphqlRoute.handle({
    deps: env.deps,
    principal,
    params: { project },
    query: new URLSearchParams(),
    body: { query, variables },
  })
  return { status: res.status, text: JSON.stringify(res.body), ...(res.body as Answer) }
}

const ID = '00000000-0000-4000-8000-000000000000'
const OPERATIONS: Record<string, string> = {
  failedEvents: '{ failedEvents { id } }',
  eventsToProcess: '{ eventsToProcess { id } }',
  eventsInProcessing: '{ eventsInProcessing { id } }',
  event: `{ event(id: "${ID}") { id } }`,
  variables: '{ variables { name value } }',
  retryEvent: `mutation { retryEvent(id: "${ID}") { ok } }`,
  stopEvent: `mutation { stopEvent(id: "${ID}") { ok } }`,
  setVariables: 'mutation { setVariables(args: { variables: [{ name: "A", value: "a" }] }) { ok } }',
  processBatch: 'mutation { processBatch { ok } }',
}
// upstream's roles: admin everything, deployer views and sets variables only; the viewer added here views events only
const ALLOWED: Record<Role, string[]> = {
  admin: Object.keys(OPERATIONS),
  deployer: ['variables', 'setVariables'],
  viewer: ['failedEvents', 'eventsToProcess', 'eventsInProcessing', 'event'],
}

describe('roles per operation', () => {
  for (const role of ['admin', 'deployer', 'viewer'] as const) {
    it(`lets the ${role} role run ${ALLOWED[role].length} of the ${Object.keys(OPERATIONS).length} operations and answers the others FORBIDDEN`, async () => {
      await schemaFor(env.deps, env.project, { t: { url: env.rx.url } })
      for (const [name, query] of Object.entries(OPERATIONS)) {
        const res = await gql(token(role), query)
        if (ALLOWED[role].includes(name)) {
          expect(res.status, name).toBe(200)
          expect(res.errors, name).toBeUndefined()
          expect(res.data?.[name], name).toBeDefined()
        } else {
          // event is nullable: its refusal leaves data, so 200; any other refusal leaves none, so 400 (upstream's statuses).
          expect(res.status, name).toBe(name === 'event' ? 200 : 400)
          expect(res.errors?.[0], name).toMatchObject({ path: [name], extensions: { code: 'FORBIDDEN' } })
          expect(res.errors?.[0]?.message, name).toContain(role)
        }
      }
    })
  }

  it('runs the allowed fields of a document beside a forbidden one', async () => {
    const res = await gql(
      token('viewer'),
      '{ failedEvents { id } event(id: "00000000-0000-4000-8000-000000000000") { id } variables { name } }',
    )
    expect(res.data).toBeNull() // variables is non-null, so its error nulls the whole data, as GraphQL says
    expect(res.errors).toHaveLength(1)
    const nullable = await gql(token('viewer'), `{ event(id: "${ID}") { id } } `)
    expect(nullable.data).toEqual({ event: null })
  })

  it('refuses a token of another project with 403 even when the router is bypassed', async () => {
    await expect(gql(token('admin', 'elsewhere'), OPERATIONS.failedEvents ?? '')).rejects.toMatchObject({ status: 403 })
    await expect(gql(token('admin', 'elsewhere'), OPERATIONS.failedEvents ?? '')).rejects.toBeInstanceOf(ProblemError)
  })

  it('lets a system caller do everything, values included', async () => {
    const res = await gql(
      { kind: 'system' },
      'mutation { setVariables(args: { variables: [{ name: "S", value: "system-value" }] }) { ok } }',
    )
    expect(res.data).toEqual({ setVariables: { ok: true } })
    expect((await gql({ kind: 'system' }, OPERATIONS.variables ?? '')).data).toEqual({ variables: [{ name: 'S', value: 'system-value' }] })
  })
})

describe('variable values', () => {
  const CANARY = 'canary-5b0e9d1f7a3c'

  it("never reach an answer to a non-admin nor a log line, though a receiver echoed one into an event's log", async () => {
    const logs = env.captureLogs()
    // The receiver echoes the value before it is a variable, so the stored log holds it verbatim.
    env.rx.respond((_, res) => {
      res.statusCode = 500
      res.end(`upstream said ${CANARY}`)
    })
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 1 } })
    const [id] = await enqueueMany(env.deps, env.project, 'to_t', 1)
    await dispatch(sqsEvent(JSON.stringify({ project: env.project })), createContext())
    const set = await gql(token('deployer'), 'mutation($v: [VariableInput!]!) { setVariables(args: { variables: $v }) { ok } }', {
      v: [{ name: 'CANARY', value: CANARY }],
    })
    expect(set.data).toEqual({ setVariables: { ok: true } })
    const answers = [
      set,
      await gql(token('deployer'), OPERATIONS.variables ?? ''),
      await gql(token('viewer'), OPERATIONS.variables ?? ''),
      await gql(token('viewer'), '{ failedEvents { id log payload } }'),
      await gql(token('deployer'), `{ event(id: "${id}") { id log payload } }`),
      await gql(token('admin'), `{ event(id: "${id}") { log } }`),
      // a value of the wrong type, a NUL and an overlong value: refused without quoting the value
      await gql(token('deployer'), 'mutation($v: [VariableInput!]!) { setVariables(args: { variables: $v }) { ok } }', {
        v: [{ name: 'X', value: { CANARY } }],
      }),
      await gql(token('deployer'), 'mutation($v: [VariableInput!]!) { setVariables(args: { variables: $v }) { ok } }', {
        v: [{ name: 'X', value: `${CANARY}\u0000` }],
      }),
      await gql(token('deployer'), 'mutation($v: [VariableInput!]!) { setVariables(args: { variables: $v }) { ok } }', {
        v: [{ name: 'bad name', value: CANARY.repeat(2000) }],
      }),
    ]
    logs.restore()
    expect(answers[1]?.data).toEqual({ variables: [{ name: 'CANARY', value: '[redacted]' }] })
    expect(answers[2]?.errors?.[0]?.extensions?.code).toBe('FORBIDDEN')
    expect(answers[3]?.text).toContain('upstream said [redacted]')
    for (const bad of answers.slice(6)) expect(bad.errors?.[0]?.extensions?.code, bad.text).toBe('BAD_USER_INPUT')
    for (const a of answers) expect(a.text).not.toContain(CANARY)
    expect(logs.lines.length).toBeGreaterThan(0)
    for (const line of logs.lines) expect(line).not.toContain(CANARY)
    // the admin reads the value: the canary was stored, so the checks above could have failed
    expect((await gql(token('admin'), OPERATIONS.variables ?? '')).data).toEqual({ variables: [{ name: 'CANARY', value: CANARY }] })
  })
})

describe('failures', () => {
  it('answers a database failure as an internal error and logs it by name only', async () => {
    const pool = createPool(env.db.url, 1)
    await pool.end()
    const logs = env.captureLogs()
    const res = await graphqlRoute.handle({
      deps: { ...env.deps, db: pool },
      principal: token('viewer'),
      params: { project: env.project },
      query: new URLSearchParams(),
      body: { query: '{ failedEvents { id } }' },
    })
    logs.restore()
    expect(res.body).toEqual({
      data: null,
      errors: [{ message: 'Internal error', path: ['failedEvents'], extensions: { code: 'INTERNAL_SERVER_ERROR' } }],
    })
    expect(logs.records()).toEqual([
      expect.objectContaining({ level: 'error', msg: 'graphql: resolver failed', path: 'failedEvents', error: 'Error' }),
    ])
    expect(logs.lines.join('\n')).not.toContain('pool')
  })

  it('keeps a retry and answers processBatch not ok when the queue does not answer, logging the signal by name', async () => {
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url } })
    const [id] = await enqueueMany(env.deps, env.project, 'to_t', 1)
    const sqs = createSqsClient(
      { ...env.deps.config, SQS_MAX_ATTEMPTS: 1 },
      { endpoint: 'http://127.0.0.1:1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } },
    )
    const deps = { ...env.deps, signals: createSignals(sqs, env.deps.config.SIGNAL_QUEUE_URL) }
    const logs = env.captureLogs()
    const send = (query: string) =>
      graphqlRoute.handle({
        deps,
        principal: token('admin'),
        params: { project: env.project },
        query: new URLSearchParams(),
        body: { query },
      })
    try {
      expect((await send(`mutation { retryEvent(id: "${id}") { ok } }`)).body).toEqual({ data: { retryEvent: { ok: true } } })
      expect((await send('mutation { processBatch { ok } }')).body).toEqual({ data: { processBatch: { ok: false } } })
    } finally {
      logs.restore()
      sqs.destroy()
    }
    expect(logs.records().filter(r => r.msg === 'graphql: signal not sent')).toHaveLength(2)
    expect(logs.lines.join('\n')).not.toContain('127.0.0.1')
  })
})
