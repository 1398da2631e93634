import type { IncomingMessage } from 'node:http'
import { Webhook } from 'standardwebhooks'
import { describe, expect, it } from 'vitest'
import { main } from '../../lib/cli/main.js'
import { setVariables } from '../../lib/db/variables.js'
import { generateSecret, signingKeys, withSignature } from '../../lib/delivery/signing.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import type { ReceivedRequest } from '../helpers/receiver.js'

// The spec's published test vector (the reference libraries' "sign function works" test).
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
}

const keysOf = (value: string) => {
  const r = signingKeys('{{KEY}}', new Map([['KEY', value]]))
  if (!r.ok || !r.keys) throw new Error('expected keys')
  return r.keys
}

/** The `webhook-id` withSignature gives a batch of these event ids. */
const webhookId = (ids: readonly string[]) => withSignature({}, keysOf(VECTOR.secret), ids, '')['webhook-id']

function headersOf(req: ReceivedRequest): Record<string, string> {
  return Object.fromEntries(
    Object.entries(req.headers as IncomingMessage['headers']).flatMap(([k, v]) => (typeof v === 'string' ? [[k, v]] : [])),
  )
}

describe('signatures', () => {
  it('matches the spec test vector', () => {
    // One event: its id is the webhook-id the spec signs.
    expect(withSignature({}, keysOf(VECTOR.secret), [VECTOR.id], VECTOR.body, VECTOR.timestamp * 1000)['webhook-signature']).toBe(
      VECTOR.signature,
    )
  })

  it('signs once per secret, space-separated, each verifiable by the standardwebhooks package', () => {
    const [a, b] = [generateSecret(), generateSecret(24)]
    const headers = withSignature(
      { 'content-type': 'application/json', 'Webhook-Id': 'forged' },
      keysOf(`${a}  ${b}`),
      ['e1'],
      VECTOR.body,
      1_700_000_000_999,
    )
    expect(headers).toEqual({
      'content-type': 'application/json',
      'webhook-id': 'e1',
      'webhook-timestamp': '1700000000',
      'webhook-signature': expect.stringMatching(/^v1,\S+ v1,\S+$/),
    })
    const now = Date.now()
    const fresh = withSignature({}, keysOf(`${a} ${b}`), ['e1'], VECTOR.body, now)
    for (const secret of [a, b]) expect(new Webhook(secret).verify(VECTOR.body, { ...fresh })).toEqual({ test: 2432232314 })
    expect(() => new Webhook(generateSecret()).verify(VECTOR.body, { ...fresh })).toThrow()
  })

  it('uses the event id for one event and a stable batch_ hash of the sorted ids otherwise', () => {
    expect(webhookId(['5b3c0f1e-0000-4000-8000-000000000001'])).toBe('5b3c0f1e-0000-4000-8000-000000000001')
    expect(webhookId(['b', 'a', 'c'])).toBe(webhookId(['c', 'b', 'a']))
    expect(webhookId(['a', 'b'])).toMatch(/^batch_[0-9a-f]{64}$/)
    expect(webhookId(['a', 'b'])).not.toBe(webhookId(['a', 'c']))
  })

  it('generates whsec_ secrets of 32 random bytes that the verifier accepts', () => {
    const s = generateSecret()
    expect(s).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(Buffer.from(s.slice(6), 'base64')).toHaveLength(32)
    expect(generateSecret()).not.toBe(s)
  })

  it('rejects a missing, empty or malformed secret variable by name, never quoting the value', () => {
    const cases: Array<[string | undefined, string]> = [
      [undefined, 'Undefined signing secret variable KEY'],
      ['  ', 'Undefined signing secret variable KEY'],
      ['whsec_tooShortAAAA', 'Signing secret variable KEY must hold whsec_ secrets'],
      ['MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'Signing secret variable KEY must hold whsec_ secrets'],
      ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa!w', 'Signing secret variable KEY must hold whsec_ secrets'],
      [`${VECTOR.secret} whsec_${'A'.repeat(100)}`, 'Signing secret variable KEY must hold whsec_ secrets'],
      [Array(5).fill(VECTOR.secret).join(' '), 'Signing secret variable KEY holds more than 4 secrets'],
    ]
    for (const [value, message] of cases) {
      const r = signingKeys('{{KEY}}', new Map(value === undefined ? [] : [['KEY', value]]))
      expect(r).toEqual({ ok: false, error: expect.stringContaining(message) })
      if (!r.ok && value?.trim()) expect(r.error).not.toContain(value.trim().split(' ')[0]?.slice(6))
    }
    expect(signingKeys(VECTOR.secret, new Map())).toEqual({ ok: false, error: 'signingSecret must name a variable as {{NAME}}' })
    expect(signingKeys(undefined, new Map())).toEqual({ ok: true })
  })

  it('prints a fresh secret with `actions signing new`, without a database', async () => {
    const out: string[] = []
    const code = await main(['signing', 'new'], {}, { out: s => out.push(s), err: s => out.push(s) })
    expect(code).toBe(0)
    expect(out).toHaveLength(1)
    expect(signingKeys('{{K}}', new Map([['K', out[0] ?? '']])).ok).toBe(true)
    expect(await main(['signing', 'old'], {}, { out: () => {}, err: () => {} })).toBe(2)
  })
})

describe('signed deliveries', () => {
  const env = useHarness({ config: { LEASE_MARGIN_MS: '1000' }, receiver: true, project: 's' })

  /** The receiver answers 200 only when every given secret verifies the request, else 401. */
  const verifyWith = (secrets: string[]) =>
    env.rx.respond((req, res) => {
      try {
        for (const s of secrets) new Webhook(s).verify(req.raw, headersOf(req))
        res.end()
      } catch {
        res.statusCode = 401
        res.end()
      }
    })

  it('signs a one-event delivery that the receiver verifies, with the event id as webhook-id', async () => {
    const secret = generateSecret()
    await setVariables(env.deps.db, env.project, { SIGNING: secret }, 'set')
    verifyWith([secret])
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, signingSecret: '{{SIGNING}}' } })
    const [id] = await enqueueMany(env.deps, env.project, 'to_t', 1)
    expect(await drainProject(env.deps, env.project, FOREVER)).toMatchObject({ succeeded: 1 })
    expect(env.rx.requests[0]?.headers['webhook-id']).toBe(id)
    expect(Number(env.rx.requests[0]?.headers['webhook-timestamp'])).toBeCloseTo(Date.now() / 1000, -2)
  })

  it('signs with both secrets during a rotation: receivers on the old and the new secret verify a batch', async () => {
    const [old, next] = [generateSecret(), generateSecret()]
    await setVariables(env.deps.db, env.project, { SIGNING: `${old} ${next}` }, 'set')
    verifyWith([old, next])
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url, signingSecret: '{{SIGNING}}', batchSize: 3 } })
    const ids = await enqueueMany(env.deps, env.project, 'to_t', 3)
    expect(await drainProject(env.deps, env.project, FOREVER)).toMatchObject({ succeeded: 3 })
    expect(env.rx.requests).toHaveLength(1)
    expect(env.rx.requests[0]?.headers['webhook-id']).toBe(webhookId(ids))
    expect(env.rx.requests[0]?.headers['webhook-signature']?.toString().split(' ')).toHaveLength(2)
  })

  it('sends unsigned requests to targets without signingSecret', async () => {
    await schemaFor(env.deps, env.project, { t: { url: env.rx.url } })
    await enqueueMany(env.deps, env.project, 'to_t', 1)
    await drainProject(env.deps, env.project, FOREVER)
    expect(Object.keys(env.rx.requests[0]?.headers ?? {}).filter(h => h.startsWith('webhook-'))).toEqual([])
  })

  it('fails the attempt without a request when the secret variable is missing or invalid, naming the variable only', async () => {
    await setVariables(env.deps.db, env.project, { BAD: 'whsec_c2hvcnQ=' }, 'set')
    await schemaFor(env.deps, env.project, {
      missing: { url: env.rx.url, signingSecret: '{{NOPE}}' },
      bad: { url: env.rx.url, signingSecret: '{{BAD}}' },
    })
    const [m] = await enqueueMany(env.deps, env.project, 'to_missing', 1)
    const [b] = await enqueueMany(env.deps, env.project, 'to_bad', 1)
    const logs = env.captureLogs()
    await drainProject(env.deps, env.project, FOREVER).finally(() => logs.restore())
    const rows = await states(env.deps, env.project)
    expect(rows.get(m ?? '')?.log).toEqual([
      { ok: false, errorMessage: 'Undefined signing secret variable NOPE', durationMs: expect.any(Number) },
    ])
    expect(rows.get(b ?? '')?.log).toEqual([
      {
        ok: false,
        errorMessage: expect.stringMatching(/^Signing secret variable BAD must hold whsec_ secrets/),
        durationMs: expect.any(Number),
      },
    ])
    expect(env.rx.requests).toHaveLength(0)
    expect(logs.lines.join('\n')).not.toContain('c2hvcnQ')
  })
})
