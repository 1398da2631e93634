import { spawn } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { storeSchema } from '../../lib/db/schemas.js'
import { useHarness } from '../helpers/harness.js'

const env = useHarness({ receiver: true })

/** Inserts `count` events of about `bytes` payload bytes each (hex text: incompressible, so stored sizes are honest). */
async function insertLargeEvents(project: string, target: string, count: number, bytes: number): Promise<void> {
  await env.deps.db.query(
    `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
     SELECT gen_random_uuid(), $1, gen_random_uuid(), 1, $2, 'to_' || $2,
            jsonb_build_object('operation', 'create', 'entity', 'Article', 'id', i,
              'values', jsonb_build_object('body', (SELECT string_agg(md5(i::text || '.' || g::text), '') FROM generate_series(1, $4::int / 32) g)))
     FROM generate_series(1, $3::int) i`,
    [project, target, count, bytes],
  )
}

/** Runs the dispatch child with a 128 MB heap; resolves with its exit code and output. */
function runChild(
  project: string,
  extraEnv: Record<string, string> = {},
): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--max-old-space-size=128', '--import', 'tsx', 'test/fault/memory-child.ts'], {
    env: {
      ...process.env,
      PROJECT: project,
      DATABASE_URL: env.db.url,
      SIGNAL_QUEUE_URL: env.queue.queueUrl,
      SQS_ENDPOINT: env.queue.endpoint,
      LOG_LEVEL: 'error',
      WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', c => {
    stdout += c
  })
  child.stderr.on('data', c => {
    stderr += c
  })
  return new Promise(resolve => child.on('exit', (code, signal) => resolve({ code, signal, stdout, stderr })))
}

describe('bounded memory', () => {
  it('drains 3,000 events of 40 KB at batchSize 1000 in a 128 MB heap, each delivered exactly once', async () => {
    const project = 'large'
    await storeSchema(env.deps.db, project, {
      targets: { t: { type: 'webhook', name: 't', url: env.rx.url, batchSize: 1000 } },
      triggers: { to_t: { type: 'basic', name: 'to_t', target: 't', entity: 'Article', create: true, delete: false, update: false } },
    })
    await insertLargeEvents(project, 't', 3000, 40_000)
    const { rows: ids } = await env.deps.db.query<{ id: string }>('SELECT id FROM actions_event WHERE project = $1', [project])

    const res = await runChild(project)
    expect(res.stderr).not.toMatch(/heap out of memory/i)
    expect(res.code).toBe(0)
    expect(JSON.parse(res.stdout)).toMatchObject({ succeeded: 3000 })

    const delivered = env.rx.eventIds()
    expect(delivered).toHaveLength(3000)
    expect(new Set(delivered)).toEqual(new Set(ids.map(r => r.id)))
    for (const r of env.rx.requests) expect(r.body.events.length).toBeLessThanOrEqual(1000)
    const { rows } = await env.deps.db.query(
      `SELECT state, num_retries, count(*)::int AS n FROM actions_event WHERE project = $1 GROUP BY 1, 2`,
      [project],
    )
    expect(rows).toEqual([{ state: 'succeed', num_retries: 1, n: 3000 }])
  }, 180_000)
})
