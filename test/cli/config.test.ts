// The CLI reads the configuration keys it shares with the functions with the same rules:
// MAX_TARGET_TIMEOUT_MS at `schema set`, the SQS client's bounded waits at the wake-up signal.
import { writeFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runCli } from '../helpers/cli.js'
import { useDatabase } from '../helpers/harness.js'
import { startSilentServer } from '../helpers/net.js'
import { TX } from '../fixtures/schemas.js'

const db = useDatabase()
let dir: string

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'actions-cli-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

const run = (env: NodeJS.ProcessEnv, ...argv: string[]) => runCli({ DATABASE_URL: db.url, ...env }, argv)

async function schemaFile(timeoutMs: number): Promise<string> {
  const file = join(dir, `schema-${timeoutMs}.json`)
  await writeFile(
    file,
    JSON.stringify({ targets: { t: { type: 'webhook', name: 't', url: 'https://hooks.example/t', timeoutMs } }, triggers: {} }),
  )
  return file
}

const versions = async (project: string) =>
  (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM actions_schema WHERE project = $1', [project])).rows[0]?.n

describe('schema set with the configured MAX_TARGET_TIMEOUT_MS', () => {
  it('stores a timeout up to the configured bound and refuses one above it, naming the bound', async () => {
    const raised = { MAX_TARGET_TIMEOUT_MS: '90000' }
    // 70 s is over the default bound (60 s): it is stored only because the configured bound is read.
    expect(await run(raised, 'schema', 'set', 'p', await schemaFile(70_000))).toMatchObject({ code: 0 })
    const over = await run(raised, 'schema', 'set', 'p', await schemaFile(95_000))
    expect(over.code).toBe(1)
    expect(over.err).toContain('timeoutMs: expected an integer from 1 to 90000')
    expect(await versions('p')).toBe(1)
  })

  it("uses the config's default when the key is unset or empty, and refuses an invalid value without storing", async () => {
    for (const env of [{}, { MAX_TARGET_TIMEOUT_MS: '' }]) {
      const res = await run(env, 'schema', 'set', 'q', await schemaFile(70_000))
      expect(res.code).toBe(1)
      expect(res.err).toContain('timeoutMs: expected an integer from 1 to 60000')
    }
    const bad = await run({ MAX_TARGET_TIMEOUT_MS: 'soon' }, 'schema', 'set', 'q', await schemaFile(1_000))
    expect(bad.code).toBe(1)
    expect(bad.err).toContain('MAX_TARGET_TIMEOUT_MS: expected a positive integer')
    expect(await versions('q')).toBe(0)
  })
})

describe("the CLI's SQS client", () => {
  it('makes SQS_MAX_ATTEMPTS attempts of SQS_REQUEST_TIMEOUT_MS each against an endpoint that never answers', async () => {
    const silent = await startSilentServer()
    try {
      const id = '3f0c7d1e-9b8a-4c6d-8e5f-1a2b3c4d5e6f'
      await db.pool.query(
        `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, num_retries)
         VALUES ($1, 'sqs', $2, 1, 't', 'tr', '{}', 'failed', 1)`,
        [id, TX],
      )
      const endpoint = silent.url
      const res = await run(
        {
          SIGNAL_QUEUE_URL: `${endpoint}/000000000000/signals`,
          AWS_ENDPOINT_URL_SQS: endpoint,
          AWS_ACCESS_KEY_ID: 'test',
          AWS_SECRET_ACCESS_KEY: 'test',
          SQS_MAX_ATTEMPTS: '3',
          SQS_REQUEST_TIMEOUT_MS: '300',
          SQS_CONNECT_TIMEOUT_MS: '300',
        },
        'events',
        'retry',
        id,
      )
      expect(res.code).toBe(1)
      expect(res.err).toMatch(/the retry stands, but the wake-up signal failed/)
      // One connection per attempt: the attempt that timed out closed its own.
      expect(silent.accepted()).toBe(3)
    } finally {
      await silent.close()
    }
  })
})
