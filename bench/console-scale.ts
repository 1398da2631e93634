// The console's API answers at scale: one project of `--events` events (default 10 million) beside
// 100 projects of 1,000, written by set-based INSERT … SELECT generate_series into a database of the
// bench's own, then every answer the console's pages ask for, called through the admin router as
// the admin function calls it (a viewer token, so the token lookup is in it), `--rounds` times each,
// interleaved. Prints p50 and p99 per answer. Run: `npx tsx bench/console-scale.ts --events 1000000`.
// Bounded: generation is one statement per table (its time is printed), every call has the router's
// own statement timeout, and `--rounds` (default 50) bounds the calls.
import { parseArgs } from 'node:util'
import pgLib from 'pg'
import { adminRoutes } from '../lib/admin/api.js'
import { createRouter } from '../lib/admin/router.js'
import { createToken } from '../lib/db/tokens.js'
import { loadConfig } from '../lib/config.js'
import { closeDeps, createDeps } from '../lib/deps.js'
import { migrate } from '../lib/db/migrate.js'
import { storeSchema } from '../lib/db/schemas.js'
import { startPostgres } from './postgres.js'
import { percentile, table } from './stats.js'

const { values: args } = parseArgs({
  options: { events: { type: 'string', default: '10000000' }, rounds: { type: 'string', default: '50' } },
})
const EVENTS = Number(args.events)
const ROUNDS = Number(args.rounds)
const TARGETS = 8
const SMALL_PROJECTS = 100

const pg = await startPostgres()
const url = await pg.freshDatabase(`actions_bench_console_${process.pid}`)
const deps = createDeps(loadConfig({ DATABASE_URL: url, SIGNAL_QUEUE_URL: 'http://127.0.0.1:9/queue', LOG_LEVEL: 'error' }))
// The generation's own connection: the engine's pool has a statement timeout made for its statements.
const gen = new pgLib.Pool({ connectionString: url, max: 1 })
try {
  await migrate(deps.db)
  const targets = Object.fromEntries(
    Array.from({ length: TARGETS }, (_, i) => [`t${i}`, { type: 'webhook', name: `t${i}`, url: 'http://127.0.0.1:9/' }]),
  )
  const schema = {
    targets,
    triggers: { x: { type: 'basic', name: 'x', entity: 'X', create: true, delete: false, update: false, target: 't0' } },
  }
  for (const p of ['big', ...Array.from({ length: SMALL_PROJECTS }, (_, i) => `p${i}`)]) await storeSchema(deps.db, p, schema)
  const started = performance.now()
  // 98 % delivered, 1.5 % failed, 0.5 % stopped, over 30 days, every resolution dated as the engine dates it.
  await gen.query(
    `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, num_retries,
                                created_at, visible_at, resolved_at, failed_at, last_state_change)
     SELECT gen_random_uuid(), 'big', gen_random_uuid(), 1, 't' || (i % ${TARGETS}), 'x', '{"id": 1}'::jsonb,
            (CASE WHEN i % 200 < 3 THEN 'failed' WHEN i % 200 = 3 THEN 'stopped' ELSE 'succeed' END)::actions_event_state, 1,
            r, r, r, CASE WHEN i % 200 < 3 THEN r END, r
     FROM generate_series(1, $1::int) AS i, LATERAL (SELECT now() - (i::float8 / $1 * 30) * interval '1 day' AS r) t`,
    [EVENTS],
  )
  // A backlog of 10,000 due events, and the small projects.
  await gen.query(
    `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload)
     SELECT gen_random_uuid(), 'big', gen_random_uuid(), 1, 't' || (i % ${TARGETS}), 'x', '{}'::jsonb FROM generate_series(1, 10000) AS i`,
  )
  await gen.query(
    `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, num_retries, resolved_at, last_state_change)
     SELECT gen_random_uuid(), 'p' || (i % ${SMALL_PROJECTS}), gen_random_uuid(), 1, 't0', 'x', '{}'::jsonb, 'succeed', 1,
            now() - i * interval '1 second', now() - i * interval '1 second'
     FROM generate_series(1, ${SMALL_PROJECTS * 1000}) AS i`,
  )
  // A full day of minutes for every target of big and its project series.
  await gen.query(
    `INSERT INTO actions_target_minute (project, target, minute, requests, delivered, failed_attempts, events_failed, duration_counts)
     SELECT 'big', t, date_trunc('minute', now()) - m * interval '1 minute', 10, 10, 1, 0, '{0,2,5,2,1,0,0,0,0,0,0,0,0,0}'
     FROM unnest(ARRAY['', ${Object.keys(targets)
       .map(t => `'${t}'`)
       .join(', ')}]) AS t, generate_series(0, 1439) AS m`,
  )
  await gen.query('VACUUM ANALYZE actions_event')
  await gen.query('ANALYZE actions_target_minute')
  const generatedS = (performance.now() - started) / 1000

  const { token } = await createToken(deps.db, { project: 'big', role: 'viewer' })
  const router = createRouter(adminRoutes())
  const failedRow = await deps.db.query<{ id: string }>(`SELECT id FROM actions_event WHERE project = 'big' AND state = 'failed' LIMIT 1`)
  const calls: Array<[string, string, Record<string, string>]> = [
    ['stats', '/v1/projects/big/stats', {}],
    ['targets', '/v1/projects/big/targets', {}],
    ['trends', '/v1/projects/big/trends', {}],
    ['trends (project)', '/v1/projects/big/trends', { series: 'project' }],
    ['events (any)', '/v1/projects/big/events', { limit: '50' }],
    ['events succeed', '/v1/projects/big/events', { state: 'succeed', limit: '50' }],
    ['events failed', '/v1/projects/big/events', { state: 'failed', limit: '50' }],
    ['events stopped', '/v1/projects/big/events', { state: 'stopped', limit: '50' }],
    ['events of t3', '/v1/projects/big/events', { target: 't3', limit: '50' }],
    ['event', `/v1/projects/big/events/${failedRow.rows[0]?.id ?? ''}`, {}],
  ]
  const times = new Map<string, number[]>(calls.map(([name]) => [name, []]))
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, path, query] of calls) {
      const t0 = performance.now()
      const res = await router(deps, {
        method: 'GET',
        path,
        query: new URLSearchParams(query),
        headers: { authorization: `Bearer ${token}` },
        body: '',
      })
      if (res.status !== 200) throw new Error(`${name}: ${res.status} ${res.body.slice(0, 200)}`)
      times.get(name)?.push(performance.now() - t0)
    }
  }
  const rows = calls.map(([name]) => {
    const sorted = [...(times.get(name) ?? [])].sort((a, b) => a - b)
    return [
      name,
      percentile(sorted, 0.5).toFixed(1),
      percentile(sorted, 0.99).toFixed(1),
      percentile(sorted, 0.99) <= 200 ? 'PASS' : 'FAIL',
    ]
  })
  process.stdout.write(
    `console-scale: ${EVENTS.toLocaleString('en')} events in one project, ${SMALL_PROJECTS} projects beside it, Postgres ${pg.version} (${pg.source}); ` +
      `generated in ${generatedS.toFixed(0)} s; ${ROUNDS} rounds\n` +
      table(['answer', 'p50 ms', 'p99 ms', '≤ 200 ms'], rows) +
      '\n',
  )
} finally {
  await gen.end()
  await closeDeps(deps)
  await pg.close()
}
