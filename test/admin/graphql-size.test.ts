// The size of a GraphQL answer is bounded: a viewer asked failedEvents { payload log } ten times
// under aliases over 60 events of 240 KB and got 140 MB in one answer. Here the same shape at a
// smaller scale under a lower GRAPHQL_MAX_ANSWER_BYTES (memory and time stay modest), and the
// default's arithmetic at its edge.
import { describe, expect, it } from 'vitest'
import { graphqlRoute } from '../../lib/admin/graphql.js'
import { answerBudget, MAX_REQUESTED_EVENTS, spend } from '../../lib/admin/graphql/budget.js'
import type { Principal } from '../../lib/admin/types.js'
import { setVariables } from '../../lib/db/variables.js'
import { DEFAULT_GRAPHQL_ANSWER_BYTES } from '../../lib/schema/limits.js'
import { loadConfig } from '../../lib/config.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { useHarness } from '../helpers/harness.js'

const CAP = 300_000
const env = useHarness({ config: { GRAPHQL_MAX_ANSWER_BYTES: String(CAP) }, project: 'size' })
const viewer = (): Principal => ({ kind: 'token', tokenId: 't', project: env.project, role: 'viewer' })

type Answer = { data?: Record<string, unknown> | null; errors?: Array<{ message: string; extensions?: { code?: string } }> }

async function gql(query: string, variables?: Record<string, unknown>, cap = CAP) {
  const res = await graphqlRoute.handle({
    deps: { ...env.deps, config: { ...env.deps.config, GRAPHQL_MAX_ANSWER_BYTES: cap } },
    principal: viewer(),
    params: { project: env.project },
    query: new URLSearchParams(),
    body: { query, variables },
  })
  const text = JSON.stringify(res.body)
  return { status: res.status, bytes: Buffer.byteLength(text), text, ...(res.body as Answer) }
}

/** `count` failed events of the project, each with a payload of about `bytes` bytes. */
async function failedEvents(count: number, bytes: number): Promise<string[]> {
  await schemaFor(env.deps, env.project, { t: { url: 'http://127.0.0.1:9' } })
  const ids = await enqueueMany(env.deps, env.project, 'to_t', count)
  await env.deps.db.query(
    `UPDATE actions_event SET state = 'failed', resolved_at = now(), failed_at = now(), num_retries = 1,
       payload = jsonb_set(payload, '{blob}', to_jsonb(repeat('p', $2::int)))
     WHERE id = ANY($1::uuid[])`,
    [ids, bytes],
  )
  return ids
}

const aliases = (n: number, limit: number) =>
  `{ ${Array.from({ length: n }, (_, i) => `a${i}: failedEvents(args: { limit: ${limit} }) { id payload log }`).join(' ')} }`

describe('an answer past GRAPHQL_MAX_ANSWER_BYTES', () => {
  it('is refused whole with ANSWER_TOO_LARGE and HTTP 400 before any payload is read, where ten aliases over 12 × 40 KB built 4.8 MB', async () => {
    await failedEvents(12, 40_000)
    const res = await gql(aliases(10, 100))
    expect(res.status).toBe(400)
    expect(res.data).toBeNull()
    expect(res.errors?.map(e => e.extensions?.code)).toEqual(Array(res.errors?.length).fill('ANSWER_TOO_LARGE'))
    expect(res.errors?.[0]?.message).toContain(String(CAP))
    // Not a cut answer: nothing of a payload.
    expect(res.text).not.toContain('ppppp')
    expect(res.bytes).toBeLessThan(10_000)
  })

  it('is answered when the events fit, and refused once one more would not', async () => {
    await failedEvents(12, 40_000)
    const fits = await gql(aliases(1, 6))
    expect(fits.status).toBe(200)
    expect((fits.data?.['a0'] as unknown[]).length).toBe(6)
    expect(fits.bytes).toBeLessThanOrEqual(CAP)
    // Eight events hold more than 300,000 stored bytes (jsonb text is at least the JSON).
    expect((await gql(aliases(1, 8))).errors?.[0]?.extensions?.code).toBe('ANSWER_TOO_LARGE')
  })

  it('is refused by the last check on the serialized answer when redaction made the text longer than it was stored', async () => {
    const [id = ''] = await failedEvents(1, 10_000)
    await setVariables(env.deps.db, env.project, { K: 'abcd' }, 'set')
    // 2,000 × a 4-character value stored: 8 KB, shown as 2,000 × [redacted], 20 KB.
    await env.deps.db.query(
      `UPDATE actions_event SET log = jsonb_build_array(jsonb_build_object('ok', false, 'response', repeat('abcd', 2000))) WHERE id = $1`,
      [id],
    )
    const query = `{ event(id: "${id}") { id payload log } }`
    const refused = await gql(query, undefined, 25_000)
    expect(refused).toMatchObject({ status: 400, data: null, errors: [{ extensions: { code: 'ANSWER_TOO_LARGE' } }] })
    expect(refused.text).not.toContain('ppppp')
    const answered = await gql(query, undefined, 40_000)
    expect(answered.status).toBe(200)
    expect(answered.text).toContain('[redacted]')
  })
})

describe('the events a document asks for', () => {
  it(`are counted before it runs: ${MAX_REQUESTED_EVENTS} in all pass, one more is refused whatever the events weigh`, async () => {
    await failedEvents(1, 10)
    expect(MAX_REQUESTED_EVENTS).toBe(10_000)
    expect((await gql('{ a: failedEvents(args: { limit: 5000 }) { id } b: failedEvents(args: { limit: 5000 }) { id } }')).status).toBe(200)
    const over = await gql('{ a: failedEvents(args: { limit: 5000 }) { id } b: eventsToProcess(args: { limit: 5001 }) { id } }')
    expect(over).toMatchObject({ status: 400, data: null, errors: [{ extensions: { code: 'QUERY_TOO_COMPLEX' } }] })
    expect(over.errors?.[0]?.message).toContain('10001 events')
    // Variables count as literals do; the default limit (100) counts for a listing without one.
    const byVariable = await gql('query($a: EventArgs) { failedEvents(args: $a) { id } eventsInProcessing { id } }', {
      a: { limit: 9_901 },
    })
    expect(byVariable.errors?.[0]?.message).toContain('10001 events')
    expect((await gql(aliases(10, 10_000))).errors?.[0]?.extensions?.code).toBe('QUERY_TOO_COMPLEX')
  })
})

describe('the default bound', () => {
  it('is 5 MiB, under the 6 MB a Lambda function URL answers, and spends to the byte', () => {
    expect(DEFAULT_GRAPHQL_ANSWER_BYTES).toBe(5 * 1024 * 1024)
    expect(DEFAULT_GRAPHQL_ANSWER_BYTES).toBeLessThan(6_000_000)
    expect(
      loadConfig({ DATABASE_URL: 'postgres://x@127.0.0.1/x', SIGNAL_QUEUE_URL: 'http://127.0.0.1:1/q', AWS_REGION: 'x' })
        .GRAPHQL_MAX_ANSWER_BYTES,
    ).toBe(DEFAULT_GRAPHQL_ANSWER_BYTES)
    const full = answerBudget(DEFAULT_GRAPHQL_ANSWER_BYTES)
    spend(full, DEFAULT_GRAPHQL_ANSWER_BYTES - 1)
    spend(full, 1)
    expect(full.left).toBe(0)
    expect(() => spend(full, 1)).toThrow(/larger than 5242880 bytes/)
    const fresh = answerBudget(DEFAULT_GRAPHQL_ANSWER_BYTES)
    expect(() => spend(fresh, DEFAULT_GRAPHQL_ANSWER_BYTES + 1)).toThrow(/ANSWER_TOO_LARGE|larger than/)
    expect(fresh.left).toBe(DEFAULT_GRAPHQL_ANSWER_BYTES)
  })
})
