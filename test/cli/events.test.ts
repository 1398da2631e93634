// The operator's event commands, against a real database, a real queue and a real receiver.
import { describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/dispatch.js'
import { LISTED_ERROR_CHARS } from '../../lib/cli/events.js'
import { runCli } from '../helpers/cli.js'
import { createContext, sqsEvent } from '../helpers/lambda.js'
import { json } from '../helpers/receiver.js'
import { useHarness } from '../helpers/harness.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'

// upstream's rule: dead targets fail events
const env = useHarness({ config: { DISPATCH_TIME_MARGIN_MS: '1000', BREAKER_FAILURES: '0' }, receiver: true })
const handler = createHandler(() => env.deps)
const run = (...argv: string[]) => runCli(env.cliEnv(), argv)

describe('operator event commands', () => {
  it('lists failed events, shows one, retries it (due now) and stops another', async () => {
    env.rx.respond((_, res) => {
      res.statusCode = 500
      res.end()
    })
    await schemaFor(env.deps, 'ops', { t: { url: env.rx.url, maxAttempts: 1 } })
    const [a, b] = await enqueueMany(env.deps, 'ops', 'to_t', 2)
    expect((await run('events', 'due', 'ops')).out).toMatch(/2 due event\(s\)/)
    await handler(sqsEvent('{"project":"ops"}'), createContext())
    const failed = await run('events', 'failed', 'ops', '--limit', '1')
    expect(failed.out).toMatch(/failed target=t trigger=to_t attempts=1 .* Internal Server Error/)
    expect(failed.out).toMatch(/1 failed event\(s\) \(limit 1\)/)
    const shown = JSON.parse((await run('events', 'show', a ?? '')).out)
    expect(shown).toMatchObject({ id: a, state: 'failed', num_retries: 1 })
    expect(await run('events', 'retry', a ?? '')).toMatchObject({ code: 0 })
    expect((await states(env.deps, 'ops')).get(a ?? '')?.state).toBe('retrying')
    expect((await run('events', 'due', 'ops')).out).toContain(a)
    expect(await run('events', 'stop', b ?? '')).toMatchObject({ code: 0 })
    expect((await states(env.deps, 'ops')).get(b ?? '')?.state).toBe('stopped')
    env.rx.respond((_, res) => {
      res.end()
    })
    await handler(sqsEvent('{"project":"ops"}'), createContext())
    expect((await states(env.deps, 'ops')).get(a ?? '')?.state).toBe('succeed')
    expect((await states(env.deps, 'ops')).get(b ?? '')?.state).toBe('stopped')
  })

  it('retries a never-attempted event back to created and rejects unknown ids and bad arguments', async () => {
    await schemaFor(env.deps, 'ops2', { t: { url: env.rx.url } })
    const [id] = await enqueueMany(env.deps, 'ops2', 'to_t', 1)
    await run('events', 'retry', id ?? '')
    expect((await states(env.deps, 'ops2')).get(id ?? '')?.state).toBe('created')
    expect((await run('events', 'show', '00000000-0000-4000-8000-000000000000')).code).toBe(1)
    expect((await run('events', 'show', 'nope')).code).toBe(2)
    expect((await run('events', 'failed', 'ops2', '--limit', 'x')).code).toBe(2)
  })

  it('sends the project a wake-up signal on retry, as upstream notifies its dispatcher', async () => {
    await schemaFor(env.deps, 'wake', { t: { url: env.rx.url } })
    const [id] = await enqueueMany(env.deps, 'wake', 'to_t', 1)
    await env.queue.drain() // enqueue's own signal
    const res = await run('events', 'retry', id ?? '')
    expect(res).toMatchObject({ code: 0, err: '' })
    expect(res.out).toContain('signalled project wake')
    expect(await env.queue.drain()).toEqual([{ project: 'wake' }])
  })

  it('keeps the retry and reports a failed signal with exit code 1 when the queue does not answer', async () => {
    env.rx.respond((_, res) => {
      res.statusCode = 500
      res.end()
    })
    await schemaFor(env.deps, 'nosig', { t: { url: env.rx.url, maxAttempts: 1 } })
    const [id] = await enqueueMany(env.deps, 'nosig', 'to_t', 1)
    await handler(sqsEvent('{"project":"nosig"}'), createContext())
    const res = await runCli({ ...env.cliEnv(), AWS_ENDPOINT_URL_SQS: 'http://127.0.0.1:1' }, ['events', 'retry', id ?? ''])
    expect(res.code).toBe(1)
    expect(res.err).toMatch(/the retry stands, but the wake-up signal failed/)
    expect(res.err).not.toContain('127.0.0.1')
    expect((await states(env.deps, 'nosig')).get(id ?? '')?.state).toBe('retrying')
    const { code, err } = await runCli({ DATABASE_URL: env.db.url }, ['events', 'retry', id ?? ''])
    expect(code).toBe(0)
    expect(err).toMatch(/no wake-up signal sent \(SIGNAL_QUEUE_URL is not set\)/)
  })

  it('lists retrying events under failed, as upstream failedEvents does, and leaves due-but-fresh ones out', async () => {
    env.rx.respond((_, res) => {
      res.statusCode = 503
      res.end()
    })
    await schemaFor(env.deps, 'both', {
      once: { url: env.rx.url, maxAttempts: 1 },
      again: { url: env.rx.url, maxAttempts: 5, initialRepeatIntervalMs: 3_600_000 },
    })
    const [dead] = await enqueueMany(env.deps, 'both', 'to_once', 1)
    const [retrying] = await enqueueMany(env.deps, 'both', 'to_again', 1)
    await handler(sqsEvent('{"project":"both"}'), createContext())
    const [fresh] = await enqueueMany(env.deps, 'both', 'to_again', 1)
    const listed = await run('events', 'failed', 'both')
    expect(listed.out).toContain(`${dead} failed`)
    expect(listed.out).toContain(`${retrying} retrying`)
    expect(listed.out).not.toContain(fresh)
    expect(listed.out).toMatch(/2 failed event\(s\)$/)
  })

  it('prints receiver text bounded: one short line per listed event, a cut text in show', async () => {
    const huge = 'x'.repeat(300_000)
    env.rx.respond((_, res) => json(res, 200, { failures: [] }))
    await schemaFor(env.deps, 'loud', { t: { url: env.rx.url, maxAttempts: 3 } })
    const [id] = await enqueueMany(env.deps, 'loud', 'to_t', 1)
    // As if a receiver's error had been stored whole (older rows, or a change of the store's bound).
    await env.deps.db.query(
      `UPDATE actions_event SET state = 'retrying', num_retries = 1, log = jsonb_build_array(jsonb_build_object('ok', false, 'errorMessage', 'bad' || chr(10) || chr(27) || '[31m' || $2::text, 'response', $2::text)) WHERE id = $1`,
      [id, huge],
    )
    const listed = await run('events', 'failed', 'loud')
    const line = listed.out.split('\n').find(l => l.startsWith(id ?? ''))
    expect(line).toBeDefined()
    expect(line?.length).toBeLessThan(LISTED_ERROR_CHARS + 250)
    expect(line).toMatch(/more characters\]$/)
    expect(line).not.toContain('\u001b')
    const shown = await run('events', 'show', id ?? '')
    expect(shown.out.length).toBeLessThan(20_000)
    expect(JSON.parse(shown.out).log[0].response).toMatch(/^x{4096}… \[295904 more characters\]$/)
  })

  it("shows stored receiver text through the redaction filter with the project's current variable values", async () => {
    const token = 'tok_Zq9-secret-value'
    const later = 'added-later-secret'
    await schemaFor(env.deps, 'leaky', { t: { url: env.rx.url, maxAttempts: 3 } })
    const [id] = await enqueueMany(env.deps, 'leaky', 'to_t', 1)
    expect(await run('variables', 'set', 'leaky', `TOKEN=${token}`)).toMatchObject({ code: 0 })
    // Stored before redaction existed: the token whole, JSON-escaped and URL-encoded, once straddling
    // the listing's cut, and a value that becomes a variable only later.
    const errorMessage = `${'e'.repeat(LISTED_ERROR_CHARS - 12)}${token} echo ${later}`
    const response = `{"authorization":"Bearer ${token}","q":"${encodeURIComponent(token)}","later":"${later}"}`
    await env.deps.db.query(
      `UPDATE actions_event SET state = 'retrying', num_retries = 1, log = jsonb_build_array(jsonb_build_object('ok', false, 'errorMessage', $2::text, 'response', $3::text)) WHERE id = $1`,
      [id, errorMessage, response],
    )
    const listed = await run('events', 'failed', 'leaky')
    const line = listed.out.split('\n').find(l => l.startsWith(id ?? '')) ?? ''
    expect(line).toContain('[redacted]')
    expect(line).not.toContain('tok_Z')
    const shown = await run('events', 'show', id ?? '')
    expect(shown.out).toContain('[redacted]')
    expect(shown.out).not.toContain(token)
    expect(shown.out).not.toContain(encodeURIComponent(token))
    expect(shown.out).toContain(later)
    expect(await run('variables', 'set', 'leaky', `LATER=${later}`)).toMatchObject({ code: 0 })
    const again = await run('events', 'show', id ?? '')
    expect(again.out).not.toContain(later)
    expect(JSON.parse(again.out).log[0].response).toBe('{"authorization":"Bearer [redacted]","q":"[redacted]","later":"[redacted]"}')
    expect((await run('events', 'failed', 'leaky')).out).not.toContain(later)
  })

  it('treats unknown flags and stray arguments as usage errors, and takes --limit=N as --limit N', async () => {
    await schemaFor(env.deps, 'flags', { t: { url: env.rx.url } })
    await enqueueMany(env.deps, 'flags', 'to_t', 3)
    expect((await run('events', 'due', 'flags', '--limit=2')).out).toMatch(/2 due event\(s\) \(limit 2\)/)
    expect((await run('events', 'due', 'flags', '--limit', '2')).out).toMatch(/2 due event\(s\) \(limit 2\)/)
    for (const argv of [
      ['events', 'due', 'flags', '--limt', '2'],
      ['events', 'due', 'flags', '--limit'],
      ['events', 'due', 'flags', 'extra'],
      ['events', 'retry', '00000000-0000-4000-8000-000000000000', '--limit', '2'],
      ['events', 'frobnicate', 'flags'],
    ]) {
      const res = await run(...argv)
      expect(res.code, argv.join(' ')).toBe(2)
      expect(res.err).toContain('Usage: actions')
    }
  })
})
