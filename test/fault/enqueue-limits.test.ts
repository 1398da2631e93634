import { randomUUID } from 'node:crypto'
import { beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { storeSchema } from '../../lib/db/schemas.js'
import { enqueue } from '../../lib/enqueue.js'
import { EnqueueValidationError } from '../../lib/enqueue/errors.js'
import { parseActionsSchema, SchemaValidationError } from '../../lib/schema/actions.js'
import { MAX_DEPTH, MAX_EVENTS_PER_REQUEST, MAX_PAYLOAD_BYTES, MAX_REQUEST_BYTES } from '../../lib/schema/limits.js'
import { useHarness } from '../helpers/harness.js'
import { createPayload, sampleSchema, TX } from '../fixtures/schemas.js'

const env = useHarness()
beforeAll(async () => {
  await storeSchema(env.db.pool, 'f', sampleSchema())
  await storeSchema(env.db.pool, 'g', sampleSchema())
})
beforeEach(async () => {
  await env.db.pool.query('DELETE FROM actions_event')
})
const count = async () => Number((await env.db.pool.query('SELECT count(*) AS n FROM actions_event')).rows[0].n)
const req = (events: unknown[], project = 'f') => ({ project, transactionId: TX, events })
const withValues = (values: unknown) => ({ trigger: 'article_created', payload: { operation: 'create', entity: 'Article', id: 1, values } })
const nested = (levels: number) => {
  let v: unknown = 1
  for (let i = 0; i < levels; i++) v = { a: v }
  return v
}
/** A create payload of exactly `bytes` bytes serialized. */
const payloadOf = (bytes: number) => {
  const empty = JSON.stringify({ operation: 'create', entity: 'Article', id: 1, values: { s: '' } }).length
  return { operation: 'create', entity: 'Article', id: 1, values: { s: 'x'.repeat(bytes - empty) } }
}
const rejects = async (input: unknown, message: RegExp) => {
  const err = await enqueue(env.deps, input).catch((e: unknown) => e)
  expect(err).toBeInstanceOf(EnqueueValidationError)
  expect(String(err)).toMatch(message)
  expect(String(err).length).toBeLessThan(4_000)
  expect(await count()).toBe(0)
}

describe('enqueue bounds, at their edges', () => {
  it('takes a payload nested exactly 64 levels and rejects 65', async () => {
    // The payload is level 1 and `values` (the outermost of the nested objects) level 2: 63 objects reach 64.
    await enqueue(env.deps, req([withValues(nested(MAX_DEPTH - 1))]))
    expect(await count()).toBe(1)
    await env.db.pool.query('DELETE FROM actions_event')
    await rejects(req([withValues(nested(MAX_DEPTH))]), /events\.0\.payload\.values(\.a)+: nested deeper than 64 levels/)
  })

  it('rejects nesting 100,000 deep without a RangeError', async () => {
    await rejects(req([withValues(nested(100_000))]), /nested deeper than 64 levels/)
  })

  it('takes a payload of exactly 256 KiB and rejects one byte more', async () => {
    await enqueue(env.deps, req([{ trigger: 'article_created', payload: payloadOf(MAX_PAYLOAD_BYTES) }]))
    expect(await count()).toBe(1)
    await env.db.pool.query('DELETE FROM actions_event')
    await rejects(
      req([{ trigger: 'article_created', payload: payloadOf(MAX_PAYLOAD_BYTES + 1) }]),
      /events\.0\.payload: 262145 bytes serialized, expected at most 262144/,
    )
  })

  it('rejects a request over 6 MB serialized', async () => {
    const events = Array.from({ length: 24 }, () => ({ trigger: 'article_created', payload: payloadOf(MAX_PAYLOAD_BYTES - 10) }))
    await rejects(req(events), new RegExp(`request: \\d+ bytes serialized, expected at most ${MAX_REQUEST_BYTES}`))
  })

  it('takes 10,000 events and rejects 10,001', async () => {
    const events = (n: number) => Array.from({ length: n }, (_, i) => ({ trigger: 'article_created', payload: createPayload(i) }))
    await enqueue(env.deps, req(events(MAX_EVENTS_PER_REQUEST)))
    expect(await count()).toBe(MAX_EVENTS_PER_REQUEST)
    await env.db.pool.query('DELETE FROM actions_event')
    await rejects(req(events(MAX_EVENTS_PER_REQUEST + 1)), /events: expected at most 10000 events/)
  })
})

describe('hostile enqueue input', () => {
  const cases: Array<[string, unknown, RegExp]> = [
    ['a NUL in a value', req([withValues({ t: 'a\u0000b' })]), /events\.0\.payload\.values\.t: contains a NUL/],
    ['a NUL in a key', req([withValues({ ['k\u0000']: 1 })]), /events\.0\.payload\.values\."k\\u0000": key contains a NUL/],
    ['a lone surrogate in a value', req([withValues({ t: 'x\uD83D' })]), /events\.0\.payload\.values\.t: contains a lone surrogate/],
    ['a lone surrogate in a key', req([withValues({ ['\uDE00']: 1 })]), /key contains a lone surrogate/],
    ['a NUL in the project name', { project: 'f\u0000', transactionId: TX, events: [] }, /project: contains a NUL/],
    [
      'a trigger named constructor',
      req([{ trigger: 'constructor', payload: createPayload() }]),
      /events\.0\.trigger: unknown trigger "constructor"/,
    ],
    [
      'a trigger named toString',
      req([{ trigger: 'toString', payload: createPayload() }]),
      /events\.0\.trigger: unknown trigger "toString"/,
    ],
    ['a 5 MB unknown key', { project: 'f', transactionId: TX, events: [], ['k'.repeat(5_000_000)]: 1 }, /unrecognized key/],
    [
      'a 5 MB trigger name',
      req([{ trigger: 't'.repeat(5_000_000), payload: createPayload() }]),
      /events\.0\.trigger: expected a name of at most 255 bytes/,
    ],
    [
      'a 256-byte project name',
      req([{ trigger: 'article_created', payload: createPayload() }], 'p'.repeat(256)),
      /project: expected a name of at most 255 bytes/,
    ],
    ['a non-JSON value', req([withValues({ n: 10n })]), /expected a JSON value, got bigint/],
  ]
  for (const [what, input, message] of cases) {
    it(`rejects ${what}, naming the path, with a bounded message and nothing written`, async () => {
      await rejects(input, message)
    })
  }

  it('rejects a repeated id within a request, naming both indexes', async () => {
    const id = randomUUID()
    await rejects(
      req([
        { id, trigger: 'article_created', payload: createPayload(1) },
        { trigger: 'article_created', payload: createPayload(2) },
        { id: id.toUpperCase(), trigger: 'article_created', payload: createPayload(3) },
      ]),
      /events\.2\.id: repeats the id of events\.0/,
    )
  })

  it("takes an id another project used: ids are the project's own", async () => {
    const id = randomUUID()
    await enqueue(env.deps, req([{ id, trigger: 'article_created', payload: createPayload() }], 'g'))
    const res = await enqueue(
      env.deps,
      req([
        { trigger: 'article_created', payload: createPayload() },
        { id, trigger: 'article_created', payload: createPayload() },
      ]),
    )
    expect(res.written).toBe(2)
    expect((await env.db.pool.query(`SELECT project FROM actions_event WHERE id = $1 ORDER BY project`, [id])).rows).toEqual([
      { project: 'f' },
      { project: 'g' },
    ])
  })
})

describe('name bounds', () => {
  const name = (bytes: number) => 'n'.repeat(bytes - 2) + 'é'
  const schemaNamed = (target: string, trigger: string) => {
    const s = sampleSchema()
    return {
      targets: { [target]: { ...Object.values(s.targets)[0], name: target } },
      triggers: { [trigger]: { ...Object.values(s.triggers)[0], name: trigger, target } },
    }
  }

  it('takes target and trigger names of 255 bytes (UTF-8) and rejects 256, naming the field', () => {
    expect(() => parseActionsSchema(schemaNamed(name(255), name(255)))).not.toThrow()
    const err = (() => {
      try {
        parseActionsSchema(schemaNamed(name(256), 'ok'))
      } catch (e) {
        return e
      }
    })()
    expect(err).toBeInstanceOf(SchemaValidationError)
    expect(String(err)).toMatch(/targets\.n{64}…: 256 bytes, expected a name of at most 255 bytes/)
    expect(() => parseActionsSchema(schemaNamed('ok', name(256)))).toThrow(
      /triggers\.n{64}…: 256 bytes, expected a name of at most 255 bytes/,
    )
  })

  it('refuses a 3,000-byte target name at schema set with a clear error, and stores nothing', async () => {
    const err = await storeSchema(env.db.pool, 'long', schemaNamed('t'.repeat(3000), 'x')).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(SchemaValidationError)
    expect(String(err)).toMatch(/3000 bytes, expected a name of at most 255 bytes/)
    expect(String(err).length).toBeLessThan(1_000)
    expect((await env.db.pool.query(`SELECT count(*)::int AS n FROM actions_schema WHERE project = 'long'`)).rows[0].n).toBe(0)
  })

  it('refuses a long project name at schema set, and long variable and target names, before Postgres sees them', async () => {
    const { setVariables } = await import('../../lib/db/variables.js')
    const { pauseTarget } = await import('../../lib/db/pauses.js')
    await expect(storeSchema(env.db.pool, 'p'.repeat(256), sampleSchema())).rejects.toThrow(
      /project: 256 bytes, expected a name of at most 255 bytes/,
    )
    await expect(setVariables(env.db.pool, 'f', { ['V'.repeat(3000)]: 'x' }, 'merge')).rejects.toThrow(/variables\.0: 3000 bytes/)
    await expect(pauseTarget(env.db.pool, 'f', 't'.repeat(3000))).rejects.toThrow(/target: 3000 bytes/)
    await storeSchema(env.db.pool, 'p'.repeat(255), sampleSchema())
  })
})

describe('schema bounds at schema set', () => {
  const target = (t: Record<string, unknown>) => sampleSchema({ hook: t })
  const edges: Array<[string, Record<string, unknown>, Record<string, unknown>, RegExp]> = [
    ['timeoutMs', { timeoutMs: 60_000 }, { timeoutMs: 60_001 }, /targets\.hook\.timeoutMs: expected an integer from 1 to 60000/],
    ['maxAttempts', { maxAttempts: 1000 }, { maxAttempts: 1001 }, /targets\.hook\.maxAttempts: expected an integer from 1 to 1000/],
    [
      'initialRepeatIntervalMs',
      { initialRepeatIntervalMs: 86_400_000 },
      { initialRepeatIntervalMs: 86_400_001 },
      /initialRepeatIntervalMs: expected an integer from 1 to 86400000/,
    ],
    ['batchSize', { batchSize: 1000 }, { batchSize: 1001 }, /batchSize: expected an integer from 1 to 1000/],
    ['the url scheme', { url: 'HTTPS://h.example/x' }, { url: 'ftp://h.example/x' }, /targets\.hook\.url: expected an http: or https: URL/],
    [
      'a header name',
      { headers: { 'X-Token': 'v' } },
      { headers: { 'X Token': 'v' } },
      /targets\.hook\.headers: a header name must be an RFC 7230 token/,
    ],
    [
      'an owned header',
      { headers: { 'User-Agent': 'v' } },
      { headers: { 'content-LENGTH': '1' } },
      /targets\.hook\.headers\.content-LENGTH: cannot be set/,
    ],
    [
      'payloadPath keys',
      { payloadPath: ['a', 'proto'] },
      { payloadPath: ['__proto__', 'events'] },
      /payloadPath: "__proto__" is not allowed/,
    ],
    [
      'body keys at any depth',
      { body: { a: { b: { prototype_: 1 } } } },
      { body: JSON.parse('{"a":{"b":{"__proto__":{"x":1}}}}') },
      /targets\.hook\.body\.a\.b\.__proto__: is not allowed as a key/,
    ],
    [
      'signingSecret',
      { signingSecret: '{{SIGNING}}' },
      { signingSecret: 'whsec_plain' },
      /signingSecret: expected a \{\{NAME\}\} variable reference/,
    ],
  ]
  for (const [what, ok, bad, message] of edges) {
    it(`takes ${what} at its edge and rejects it past`, () => {
      expect(() => parseActionsSchema(target(ok))).not.toThrow()
      const err = (() => {
        try {
          parseActionsSchema(target(bad))
        } catch (e) {
          return e
        }
      })()
      expect(err).toBeInstanceOf(SchemaValidationError)
      expect(String(err)).toMatch(message)
    })
  }

  it('takes priority as a 32-bit integer and rejects 2^31', () => {
    const withPriority = (priority: number) => ({
      ...sampleSchema(),
      triggers: { ...sampleSchema().triggers, article_urgent: { ...sampleSchema().triggers.article_urgent, priority } },
    })
    expect(() => parseActionsSchema(withPriority(-2147483648))).not.toThrow()
    expect(() => parseActionsSchema(withPriority(2147483648))).toThrow(/triggers\.article_urgent\.priority: expected a 32-bit integer/)
  })

  it('bounds timeoutMs by the configured limit', () => {
    expect(() => parseActionsSchema(target({ timeoutMs: 120_000 }), { maxTimeoutMs: 120_000 })).not.toThrow()
    expect(() => parseActionsSchema(target({ timeoutMs: 120_001 }), { maxTimeoutMs: 120_000 })).toThrow(/from 1 to 120000/)
  })

  it('never quotes a URL or header value in its message', () => {
    const err = (() => {
      try {
        parseActionsSchema(target({ url: 'ftp://SECRET-HOST/x', headers: { Host: 'SECRET-VALUE' } }))
      } catch (e) {
        return e
      }
    })()
    expect(String(err)).not.toMatch(/SECRET/)
  })

  it('reads back a stored schema that predates a bound, for dispatch to hold the target back', async () => {
    const old = target({ timeoutMs: 36_000_000, maxAttempts: 3e9 })
    await env.db.pool.query(`INSERT INTO actions_schema (project, version, schema) VALUES ('legacy', 1, $1)`, [JSON.stringify(old)])
    const { getCurrentSchema } = await import('../../lib/db/schemas.js')
    expect((await getCurrentSchema(env.db.pool, 'legacy'))?.schema.targets.hook).toMatchObject({ timeoutMs: 36_000_000, maxAttempts: 3e9 })
  })
})
