import { describe, expect, it } from 'vitest'
import { getCurrentSchema, storeSchema } from '../../lib/db/schemas.js'
import { parseActionsSchema, parseStoredActionsSchema, SchemaValidationError } from '../../lib/schema/actions.js'
import { MAX_SCHEMA_BYTES } from '../../lib/schema/limits.js'
import { useDatabase } from '../helpers/harness.js'
import { sampleSchema } from '../fixtures/schemas.js'

const db = useDatabase()

describe('actions schema validation', () => {
  it('accepts a schema with basic and watch triggers and every target option', () => {
    const s = sampleSchema({
      hook: {
        headers: { Authorization: 'Bearer {{token}}' },
        body: { a: 1 },
        payloadPath: [],
        timeoutMs: 1000,
        maxAttempts: 3,
        initialRepeatIntervalMs: 100,
        batchSize: 50,
      },
    })
    expect(parseActionsSchema(s).targets.hook?.batchSize).toBe(50)
  })

  const cases: Array<[string, (s: ReturnType<typeof sampleSchema>) => unknown, string]> = [
    [
      'a non-integer timeout',
      s => ({ ...s, targets: { ...s.targets, hook: { ...s.targets.hook, timeoutMs: 1.5 } } }),
      'targets.hook.timeoutMs: expected an integer from 1 to 60000',
    ],
    [
      'a negative maxAttempts',
      s => ({ ...s, targets: { ...s.targets, hook: { ...s.targets.hook, maxAttempts: -1 } } }),
      'targets.hook.maxAttempts: expected an integer from 1 to 1000',
    ],
    [
      'an unknown target option',
      s => ({ ...s, targets: { ...s.targets, hook: { ...s.targets.hook, retries: 3 } } }),
      'targets.hook: unrecognized key(s): "retries"',
    ],
    [
      'a trigger naming a missing target',
      s => ({ ...s, triggers: { ...s.triggers, article_created: { ...s.triggers.article_created, target: 'gone' } } }),
      'triggers.article_created.target: unknown target',
    ],
    ['an unknown trigger type', s => ({ ...s, triggers: { x: { type: 'cron', name: 'x', target: 'hook' } } }), 'triggers.x.type'],
  ]
  for (const [what, change, message] of cases) {
    it(`rejects ${what}, naming the path`, () => {
      const err = (() => {
        try {
          parseActionsSchema(change(sampleSchema()))
        } catch (e) {
          return e
        }
      })()
      expect(err).toBeInstanceOf(SchemaValidationError)
      expect(String(err)).toContain(message)
    })
  }

  it('accepts a variable anywhere in an http(s) URL: port, host, part of the host, credentials, path and query', () => {
    for (const url of [
      'http://127.0.0.1:{{PORT}}/hook',
      'https://{{HOST}}:{{PORT}}',
      'https://hooks.{{DOMAIN}}/in',
      'http://[{{IPV6}}]:8080/',
      'https://{{USER}}:{{PASS}}@h.example/x',
      'https://h.example/{{PATH}}/in?token={{TOKEN}}',
      '{{URL}}',
      '{{BASE}}/hook',
    ]) {
      expect(parseActionsSchema(sampleSchema({ hook: { url } })).targets.hook?.url).toBe(url)
    }
  })

  it('still refuses a URL that cannot become http(s), or whose fixed host or port is invalid', () => {
    for (const url of [
      'ftp://{{HOST}}/x',
      'mailto:{{ADDRESS}}',
      'h.example/{{PATH}}',
      'http://bad host/{{PATH}}',
      'http://h.example:99999/{{PATH}}',
      'http://{{ host }}/x',
    ]) {
      const err = (() => {
        try {
          parseActionsSchema(sampleSchema({ hook: { url } }))
        } catch (e) {
          return e
        }
      })()
      expect(err, url).toBeInstanceOf(SchemaValidationError)
      expect(String(err)).toContain('targets.hook.url: expected an http: or https: URL')
    }
  })

  it('stores a URL whose port is a variable', async () => {
    const version = await storeSchema(db.pool, 'port', sampleSchema({ hook: { url: 'http://127.0.0.1:{{PORT}}/hook' } }))
    expect(await getCurrentSchema(db.pool, 'port')).toMatchObject({
      version,
      schema: { targets: { hook: { url: 'http://127.0.0.1:{{PORT}}/hook' } } },
    })
  })

  it('takes a schema of exactly MAX_SCHEMA_BYTES serialized and refuses one byte more, naming the limit', async () => {
    const padded = (bytes: number) => {
      const s = sampleSchema({ hook: { body: { pad: '' } } })
      return sampleSchema({ hook: { body: { pad: 'x'.repeat(bytes - Buffer.byteLength(JSON.stringify(s))) } } })
    }
    expect(await storeSchema(db.pool, 'max', padded(MAX_SCHEMA_BYTES))).toBe(1)
    const over = padded(MAX_SCHEMA_BYTES + 1)
    await expect(storeSchema(db.pool, 'max', over)).rejects.toThrow(
      `schema: ${MAX_SCHEMA_BYTES + 1} bytes serialized, expected at most ${MAX_SCHEMA_BYTES} (MAX_SCHEMA_BYTES, 8 MiB)`,
    )
    // A version stored before the bound existed is still read.
    expect(parseStoredActionsSchema(over).targets.hook?.name).toBe('hook')
  })

  it('stores versions in order and validates before storing', async () => {
    expect(await storeSchema(db.pool, 'p', sampleSchema())).toBe(1)
    await expect(storeSchema(db.pool, 'p', { targets: {} })).rejects.toThrow(/triggers/)
    expect(await storeSchema(db.pool, 'p', sampleSchema({ hook: { batchSize: 5 } }))).toBe(2)
    expect((await getCurrentSchema(db.pool, 'p'))?.schema.targets.hook?.batchSize).toBe(5)
  })
})
