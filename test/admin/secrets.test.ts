// Secrets against the whole admin surface, through the router with real tokens: a receiver that quotes
// back everything it was sent (the variables, the schema's literal header values) and a variable value
// of 16,000 × € (144,000 characters URL-encoded), then every route a non-admin may call. No answer,
// problem body or log line holds a secret, and every answer is a 200 or a problem, never a 500.
import { beforeEach, describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/dispatch.js'
import { adminRoutes } from '../../lib/admin/api.js'
import { createRouter } from '../../lib/admin/router.js'
import { createToken } from '../../lib/db/tokens.js'
import type { Role } from '../../lib/admin/types.js'
import { MAX_VARIABLE_CHARS } from '../../lib/schema/limits.js'
import { WITHHELD } from '../../lib/text.js'
import { runCli } from '../helpers/cli.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { useHarness } from '../helpers/harness.js'
import { createContext, sqsEvent } from '../helpers/lambda.js'

const env = useHarness({ config: { DISPATCH_TIME_MARGIN_MS: '1000', BREAKER_FAILURES: '0' }, receiver: true, project: 'sec' })
const dispatch = createHandler(() => env.deps)
const router = createRouter(adminRoutes())

const LONG = '€'.repeat(16_000)
const SHORT = 'short-canary-7c1e9a'
const LITERAL = 'literal-header-canary-91d2b4'
/** Pieces any leak of the secrets would hold (the long value's plain, JSON and URL-encoded starts). */
const PIECES = [SHORT, LITERAL, '€'.repeat(50), '%E2%82%AC'.repeat(20)]

type Answer = { status: number; text: string; json: Record<string, unknown> }
const answers: Answer[] = []

async function call(token: string, method: string, path: string, body?: unknown, query = ''): Promise<Answer> {
  const res = await router(env.deps, {
    method,
    path,
    query: new URLSearchParams(query),
    headers: { authorization: `Bearer ${token}` },
    body: body === undefined ? '' : JSON.stringify(body),
  })
  const answer = { status: res.status, text: res.body, json: res.body ? (JSON.parse(res.body) as Record<string, unknown>) : {} }
  answers.push(answer)
  return answer
}

const tokens: Partial<Record<Role, string>> = {}
const tokenOf = (role: Role): string => tokens[role] ?? ''

beforeEach(async () => {
  for (const role of ['viewer', 'deployer', 'admin'] as const)
    tokens[role] = (await createToken(env.db.pool, { project: env.project, role })).token
  answers.length = 0
})

const gql = (role: Role, query: string, variables?: Record<string, unknown>) =>
  call(tokenOf(role), 'POST', `/actions/${env.project}`, { query, variables })

/** Every route a viewer or deployer may call that reads events or variables, with their answers kept. */
async function readEverything(id: string): Promise<void> {
  const p = `/v1/projects/${env.project}`
  for (const role of ['viewer', 'deployer'] as const) {
    const t = tokenOf(role)
    expect((await call(t, 'GET', `${p}/events`)).status).toBe(200)
    expect((await call(t, 'GET', `${p}/events`, undefined, 'state=failed')).status).toBe(200)
    expect((await call(t, 'GET', `${p}/events/${id}`)).status).toBe(200)
    expect((await call(t, 'GET', `${p}/stats`)).status).toBe(200)
    expect((await call(t, 'GET', `${p}/targets`)).status).toBe(200)
    expect((await call(t, 'GET', `${p}/variables`)).status).toBe(200)
    for (const query of [
      '{ failedEvents(args: { limit: 100 }) { id log payload } }',
      '{ eventsToProcess { id log } eventsInProcessing { id log } }',
      `{ event(id: "${id}") { id log payload } }`,
    ]) {
      const res = await gql(role, query)
      // As upstream, a deployer reads no events through GraphQL: refused, 400 (event is nullable: 200).
      if (role === 'deployer') expect(JSON.stringify(res.json['errors']), query).toContain('FORBIDDEN')
      else {
        expect(res.status, query).toBe(200)
        expect(res.json['errors'], query).toBeUndefined()
      }
    }
  }
  const variables = await gql('deployer', '{ variables { name value } }')
  expect(variables.status).toBe(200)
}

describe('secrets across the admin surface', () => {
  it('keeps a 16,000 × € value, the other values and the literal header values out of every answer and log line', async () => {
    const logs = env.captureLogs()
    try {
      await schemaFor(env.deps, env.project, {
        t: { url: env.rx.url, maxAttempts: 1, headers: { 'x-literal-key': LITERAL, authorization: 'Bearer {{SHORT}}' } },
      })
      // A deployer sets both through GraphQL: the long one is within the documented bound.
      expect(LONG.length).toBeLessThanOrEqual(MAX_VARIABLE_CHARS)
      const set = await gql('deployer', 'mutation($v: [VariableInput!]!) { setVariables(args: { variables: $v }) { ok } }', {
        v: [
          { name: 'LONG', value: LONG },
          { name: 'SHORT', value: SHORT },
        ],
      })
      expect(set.json).toEqual({ data: { setVariables: { ok: true } } })
      // The receiver quotes back what it got (the headers, literal and substituted) and the long value.
      env.rx.respond((req, res) => {
        res.statusCode = 500
        res.end(`rejected: ${JSON.stringify(req.headers)} key ${LONG} url-key ${encodeURIComponent(LONG)}`)
      })
      const [id = ''] = await enqueueMany(env.deps, env.project, 'to_t', 1)
      await dispatch(sqsEvent(JSON.stringify({ project: env.project })), createContext())
      expect(env.rx.requests).toHaveLength(1)
      const { rows } = await env.deps.db.query<{ state: string; log: Array<{ response?: string }> }>(
        'SELECT state, log FROM actions_event WHERE id = $1',
        [id],
      )
      // The attempt is recorded (the event says what happened), its stored text already redacted.
      expect(rows[0]?.state).toBe('failed')
      const stored = JSON.stringify(rows[0]?.log)
      expect(stored).toContain('[redacted]')
      for (const piece of PIECES) expect(stored).not.toContain(piece)

      await readEverything(id)
      const detail = answers.find(a => a.text.includes('"log"') && a.text.includes('rejected'))
      expect(detail?.text).toContain('[redacted]')
    } finally {
      logs.restore()
    }
    expect(answers.length).toBeGreaterThan(15)
    for (const a of answers) for (const piece of PIECES) expect(a.text, a.text.slice(0, 200)).not.toContain(piece)
    expect(logs.lines.length).toBeGreaterThan(0)
    for (const line of logs.lines) for (const piece of PIECES) expect(line).not.toContain(piece)
  })

  it('withholds a stored reply whose redaction would cost past its bound, and logs nothing secret', async () => {
    const logs = env.captureLogs()
    try {
      await schemaFor(env.deps, env.project, { t: { url: env.rx.url, maxAttempts: 1 } })
      // Ten long values sharing the reply's first characters: each position of the reply is compared
      // with all ten, past MAX_REDACTION_WORK for the stored 4 KiB.
      const variables = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`V${i}`, `zzzz${'y'.repeat(5_000)}${i}`]))
      const put = await call(tokenOf('deployer'), 'PATCH', `/v1/projects/${env.project}/variables`, {
        variables: { ...variables, SHORT },
      })
      expect(put.status).toBe(200)
      env.rx.respond((_, res) => {
        res.statusCode = 500
        res.end(`${SHORT} ${'z'.repeat(5_000)}`)
      })
      const [id = ''] = await enqueueMany(env.deps, env.project, 'to_t', 1)
      await dispatch(sqsEvent(JSON.stringify({ project: env.project })), createContext())
      const { rows } = await env.deps.db.query<{ state: string; log: Array<{ response?: string }> }>(
        'SELECT state, log FROM actions_event WHERE id = $1',
        [id],
      )
      expect(rows[0]?.state).toBe('failed')
      expect(rows[0]?.log[0]?.response).toBe(WITHHELD)
      await readEverything(id)
    } finally {
      logs.restore()
    }
    for (const a of answers) expect(a.text).not.toContain(SHORT)
    for (const line of logs.lines) expect(line).not.toContain(SHORT)
  })

  it('refuses a value past MAX_VARIABLE_CHARS on REST PUT and PATCH, GraphQL and the CLI alike, naming the variable only', async () => {
    const over = 'v'.repeat(MAX_VARIABLE_CHARS) + SHORT
    const at = 'v'.repeat(MAX_VARIABLE_CHARS)
    const p = `/v1/projects/${env.project}/variables`
    for (const method of ['PUT', 'PATCH']) {
      const refused = await call(tokenOf('deployer'), method, p, { variables: { BIG: over } })
      expect(refused.status, method).toBe(400)
      expect(refused.text).toContain('BIG')
      expect(refused.text).toContain(String(MAX_VARIABLE_CHARS))
      expect((await call(tokenOf('deployer'), method, p, { variables: { BIG: at } })).status, method).toBe(200)
    }
    const mutation = 'mutation($v: [VariableInput!]!) { setVariables(args: { variables: $v }) { ok } }'
    const refused = await gql('deployer', mutation, { v: [{ name: 'BIG', value: over }] })
    expect(JSON.stringify(refused.json)).toContain('BAD_USER_INPUT')
    expect((await gql('deployer', mutation, { v: [{ name: 'BIG', value: at }] })).json).toEqual({ data: { setVariables: { ok: true } } })
    // The CLI reaches the same bound: refused, the value never echoed.
    const cli = await runCli(env.cliEnv(), ['variables', 'set', env.project, `BIG=${over}`])
    expect(cli.code).not.toBe(0)
    expect(cli.err).toContain(String(MAX_VARIABLE_CHARS))
    expect(cli.err + cli.out).not.toContain(SHORT)
    expect((await runCli(env.cliEnv(), ['variables', 'set', env.project, `BIG=${at}`])).code).toBe(0)
    for (const a of answers) expect(a.text).not.toContain(SHORT)
  })
})
