// Hostile receivers, through the real dispatch path: whatever a receiver answers (or does not), the
// drain finishes, every attempt is counted, the event says what happened, the other events of the
// same statement are recorded, and what is stored and logged is valid, bounded and free of secrets.
import type { ServerResponse } from 'node:http'
import { describe, expect, it } from 'vitest'
import { drainProject } from '../../lib/dispatch/drain.js'
import { UNRECORDABLE } from '../../lib/dispatch/recorder.js'
import { setVariables } from '../../lib/db/variables.js'
import { LOGGED_EXCERPT_BYTES, STORED_ERROR_BYTES, STORED_RESPONSE_BYTES } from '../../lib/text.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import type { ReceivedRequest } from '../helpers/receiver.js'

const env = useHarness({ config: { LEASE_MARGIN_MS: '1000' }, receiver: true, project: 'fault' })
/** No log line may carry more receiver text than this (the engine's own fields included). */
const MAX_LOG_LINE_BYTES = 4 * 1024

type Hostile = (req: ReceivedRequest, res: ServerResponse) => void
type Row = { state: string; num_retries: number; log: Array<Record<string, unknown>> }

/**
 * Delivers three events to target `bad` (answered by `hostile`, in one batch) and two to target
 * `good` (answered 200) in one drain, and checks what holds whatever the receiver did: the drain
 * finished, every event had its attempt counted, `good` succeeded, stored text is valid and bounded,
 * log lines are bounded. Returns the `bad` rows in batch order and the log lines.
 */
async function drainAgainst(hostile: Hostile, bad: Record<string, unknown> = {}) {
  env.rx.respond((req, res) => {
    if (req.path === '/bad') hostile(req, res)
    else res.end()
  })
  await schemaFor(env.deps, env.project, {
    bad: { url: env.rx.url + '/bad', batchSize: 3, maxAttempts: 3, ...bad },
    good: { url: env.rx.url + '/good', batchSize: 3 },
  })
  const badIds = await enqueueMany(env.deps, env.project, 'to_bad', 3)
  const goodIds = await enqueueMany(env.deps, env.project, 'to_good', 2)
  const logs = env.captureLogs()
  await drainProject(env.deps, env.project, FOREVER).finally(() => logs.restore())

  const rows = (await states(env.deps, env.project)) as Map<string, Row>
  for (const id of [...badIds, ...goodIds]) expect(rows.get(id)?.num_retries).toBe(1)
  for (const id of goodIds) expect(rows.get(id)?.state).toBe('succeed')
  for (const id of badIds) {
    for (const entry of rows.get(id)?.log ?? []) {
      expect(Buffer.byteLength(String(entry.errorMessage ?? ''))).toBeLessThanOrEqual(STORED_ERROR_BYTES)
      expect(Buffer.byteLength(String(entry.response ?? ''))).toBeLessThanOrEqual(STORED_RESPONSE_BYTES)
    }
  }
  for (const line of logs.lines) expect(Buffer.byteLength(line)).toBeLessThanOrEqual(MAX_LOG_LINE_BYTES)
  const sent: string[] = (env.rx.requests.find(r => r.path === '/bad')?.body.events ?? []).map(
    (e: { meta: { eventId: string } }) => e.meta.eventId,
  )
  const order = sent.length ? sent : badIds
  return { rows: order.map(id => rows.get(id)), logs: logs.lines }
}

/** Answers 200 JSON naming the first event of the batch failed with `error` (raw JSON text). */
const failFirstWith =
  (errorJson: string): Hostile =>
  (req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(`{"failures":[{"eventId":"${req.body.events[0].meta.eventId}","error":${errorJson}}]}`)
  }

const retrying = (row: Row | undefined) =>
  expect(row).toMatchObject({ state: 'retrying', num_retries: 1, log: [expect.objectContaining({ ok: false })] })

describe('hostile receivers', () => {
  it('stores a non-2xx body holding NUL with the NUL replaced', async () => {
    const { rows } = await drainAgainst((_, res) => {
      res.writeHead(500, { 'content-type': 'text/plain' })
      res.end('before\u0000after')
    })
    for (const row of rows) {
      retrying(row)
      expect(row?.log[0]).toMatchObject({ code: 500, errorMessage: 'Internal Server Error', response: 'before\uFFFDafter' })
    }
  })

  it('cuts emoji text at the byte limit on a character boundary', async () => {
    const { rows } = await drainAgainst((_, res) => {
      res.writeHead(502)
      res.end('a' + '😀'.repeat(3000))
    })
    for (const row of rows) {
      retrying(row)
      expect(row?.log[0]?.response).toBe('a' + '😀'.repeat(1023))
    }
  })

  it('stores a failures[].error holding lone surrogates and NUL as valid text, and records the rest of the batch', async () => {
    const { rows } = await drainAgainst(failFirstWith('"x\\ud800y\\u0000z\\udc00"'))
    retrying(rows[0])
    expect(rows[0]?.log[0]).toMatchObject({ code: 200, errorMessage: 'x\uFFFDy\uFFFDz\uFFFD' })
    for (const row of rows.slice(1)) expect(row).toMatchObject({ state: 'succeed', num_retries: 1 })
  })

  it('keeps 1 KiB of a 900 KB error in the event log, and a 200-byte excerpt in the failure log line', async () => {
    const { rows, logs } = await drainAgainst(failFirstWith(JSON.stringify('E'.repeat(900_000))), { maxAttempts: 1 })
    expect(rows[0]).toMatchObject({ state: 'failed', num_retries: 1 })
    expect(rows[0]?.log[0]?.errorMessage).toBe('E'.repeat(STORED_ERROR_BYTES))
    const failedLine = logs.map(l => JSON.parse(l)).find(l => l.msg === 'Action event failed permanently, no attempts left')
    expect(failedLine?.errorMessage).toBe('E'.repeat(LOGGED_EXCERPT_BYTES))
  })

  it('keeps 4 KiB of a huge error page', async () => {
    const { rows } = await drainAgainst((_, res) => {
      res.writeHead(500, { 'content-type': 'text/html' })
      res.end('<p>' + 'z'.repeat(5_000_000))
    })
    for (const row of rows) {
      retrying(row)
      expect(Buffer.byteLength(String(row?.log[0]?.response))).toBe(STORED_RESPONSE_BYTES)
    }
  })

  it('fails a huge JSON answer as an invalid response', async () => {
    const { rows } = await drainAgainst((_, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{"failures":[],"pad":"' + 'p'.repeat(5_000_000) + '"}')
    })
    for (const row of rows) {
      retrying(row)
      expect(row?.log[0]).toMatchObject({ code: 200, errorMessage: expect.stringMatching(/^Invalid response: body longer than/) })
    }
  })

  it('fails the attempt of a receiver that never answers at timeoutMs', async () => {
    const { rows } = await drainAgainst(
      () => {
        /* never answers */
      },
      { timeoutMs: 300 },
    )
    for (const row of rows) {
      retrying(row)
      expect(row?.log[0]).toMatchObject({ errorMessage: 'Timeout after 300 ms' })
    }
  })

  it('fails the attempt of a receiver that trickles its body at timeoutMs', async () => {
    const { rows } = await drainAgainst(
      (_, res) => {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.write('{"failures":[')
        const drip = setInterval(() => res.write(' '), 50)
        res.on('close', () => clearInterval(drip))
      },
      { timeoutMs: 400 },
    )
    for (const row of rows) {
      retrying(row)
      expect(row?.log[0]).toMatchObject({ errorMessage: 'Timeout after 400 ms' })
    }
  })
})

describe('secrets echoed by a receiver', () => {
  const token = 'tok_live_4f9a8b7c6d5e'

  it('stores and logs [redacted] where an echoed {{TOKEN}} header was', async () => {
    await setVariables(env.deps.db, env.project, { TOKEN: token }, 'set')
    const { rows, logs } = await drainAgainst(
      (req, res) => {
        res.statusMessage = `Rejected ${String(req.headers.authorization)}`
        res.writeHead(401, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ youSent: req.headers }))
      },
      { headers: { Authorization: 'Bearer {{TOKEN}}' } },
    )
    expect(env.rx.requests.find(r => r.path === '/bad')?.headers.authorization).toBe(`Bearer ${token}`)
    for (const row of rows) {
      retrying(row)
      // The substituted header value is a secret as a whole (lib/delivery/secrets.ts), the variable in it too.
      expect(row?.log[0]).toMatchObject({
        code: 401,
        errorMessage: 'Rejected [redacted]',
        response: expect.stringContaining('"authorization":"[redacted]"'),
      })
      expect(JSON.stringify(row)).not.toContain(token)
    }
    expect(logs.join('\n')).not.toContain(token)
    expect(logs.join('\n')).toContain('Rejected [redacted]')
  })

  it('redacts an echoed token in a failures[].error', async () => {
    await setVariables(env.deps.db, env.project, { TOKEN: token }, 'set')
    const { rows, logs } = await drainAgainst(
      (req, res) => failFirstWith(JSON.stringify(`bad auth ${String(req.headers['x-key'])}`))(req, res),
      { headers: { 'X-Key': '{{TOKEN}}' }, maxAttempts: 1 },
    )
    expect(rows[0]?.log[0]).toMatchObject({ errorMessage: 'bad auth [redacted]' })
    expect(logs.join('\n')).not.toContain(token)
  })
})

describe('a record statement the database refuses', () => {
  it('records the other rows of the statement, and the refused one with a minimal entry that still counts the attempt', async () => {
    // A real refusal by Postgres for one row's data, whatever the cause: the bulk statement fails whole.
    await env.deps.db.query(`CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.log::text LIKE '%poison%' THEN RAISE EXCEPTION 'refused' USING ERRCODE = '22000'; END IF; RETURN NEW; END $$`)
    await env.deps.db.query('CREATE TRIGGER refuse_poison BEFORE UPDATE ON actions_event FOR EACH ROW EXECUTE FUNCTION refuse_poison()')
    try {
      const { rows, logs } = await drainAgainst((req, res) => {
        const [first, second] = req.body.events.map((e: { meta: { eventId: string } }) => e.meta.eventId)
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(
          JSON.stringify({
            failures: [
              { eventId: first, error: 'poison pill' },
              { eventId: second, error: 'plain failure' },
            ],
          }),
        )
      })
      expect(rows[0]).toMatchObject({
        state: 'retrying',
        num_retries: 1,
        log: [{ ok: false, code: 200, errorMessage: UNRECORDABLE, durationMs: expect.any(Number) }],
      })
      expect(rows[1]).toMatchObject({ state: 'retrying', num_retries: 1, log: [{ ok: false, code: 200, errorMessage: 'plain failure' }] })
      expect(rows[2]).toMatchObject({ state: 'succeed', num_retries: 1 })
      const records = logs.map(l => JSON.parse(l))
      expect(
        records.some(r => r.msg === 'Could not record an attempt with its log entry; recorded a minimal one' && r.sqlState === '22000'),
      ).toBe(true)
      expect(logs.join('\n')).not.toContain('poison')
    } finally {
      await env.deps.db.query('DROP TRIGGER refuse_poison ON actions_event')
      await env.deps.db.query('DROP FUNCTION refuse_poison()')
    }
  })
})
