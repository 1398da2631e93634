// An experiment, not a contender: what taking the claim's lease out of the indexed
// columns saves, measured on a table shaped as actions_event; it chose the design of migration 017
// (fillfactor 50, not 85) before the engine had it, and keeps the comparison reproducible. The old
// design writes the lease into `visible_at` (in the due index) and `state` (in every partial index's
// predicate), so both the claim and the record are non-HOT updates. The new one keeps the lease in a
// column no index covers, moves every index predicate to `resolved_at`, and leaves room on each page
// (fillfactor) for the claim's new row version: the claim becomes HOT, but claimed events stay in the
// due index at their old place, at its head, where every later claim reads past them.
// Run: npm run bench:lease (a few minutes; DATABASE_URL, else 127.0.0.1:5432, else embedded Postgres).
import pg from 'pg'
import { createCpuMeter } from './cpu.js'
import { startPostgres } from './postgres.js'
import { summary, table } from './stats.js'

type Design = {
  name: string
  fillfactor: number
  /** The column the claim writes its lease into, and the record's fence compares. */
  lease: 'visible_at' | 'lease_until'
  indexes: string[]
  /** Due, for the row `d`. */
  due: string
}

const VISIBLE_AT_DUE = `d.state IN ('created', 'retrying', 'processing') AND d.visible_at <= now()`
const COLUMN_DUE = `d.resolved_at IS NULL AND d.visible_at <= now() AND (d.lease_until IS NULL OR d.lease_until <= now())`
const leaseInVisibleAt: Design = {
  name: 'lease in visible_at (before 017)',
  fillfactor: 100,
  lease: 'visible_at',
  indexes: [
    `(project, priority DESC, visible_at, seq) WHERE state IN ('created', 'retrying', 'processing')`,
    `(project, last_state_change) WHERE state = 'failed'`,
    `(resolved_at) WHERE state IN ('succeed', 'stopped', 'failed')`,
  ],
  due: VISIBLE_AT_DUE,
}
const column = (fillfactor: number): Design => ({
  name: `lease column, fillfactor ${fillfactor}`,
  fillfactor,
  lease: 'lease_until',
  indexes: [
    `(project, priority DESC, visible_at, seq) WHERE resolved_at IS NULL`,
    `(project, failed_at) WHERE failed_at IS NOT NULL`,
    `(resolved_at) WHERE resolved_at IS NOT NULL`,
  ],
  due: COLUMN_DUE,
})
const DESIGNS = [leaseInVisibleAt, column(85), column(50)]
/**
 * Events per claim statement (the record of a claim is one statement too). Not the engine's batchSize:
 * at batchSize 1 a drain still claims many one-event batches per statement and records them together
 * (0.013 statements per event), so 10 stands for it better than 1 would; a claim of one event per
 * statement measures the planner (about 1 ms a statement here), not the row writes.
 */
const CLAIM_SIZES = [10, 50]
/** Rounds of every cell, designs interleaved; the table shows each cell's median. */
const ROUNDS = 3
/** Events claimed before the run and left in flight (a lease of an hour): the head a column-lease claim reads past. */
const IN_FLIGHT = [0, 64]
const WORKERS = 4
const EVENTS = 100_000
const RUN_MS = 4_000

/** Creates the table of one design and fills it with EVENTS due events of distinct ordering keys. */
async function prepare(db: pg.Client, d: Design, inFlight: number): Promise<void> {
  await db.query(`DROP TABLE IF EXISTS lease_ev`)
  await db.query(`CREATE TABLE lease_ev (
    id uuid NOT NULL DEFAULT gen_random_uuid(), project text NOT NULL, priority int NOT NULL DEFAULT 0,
    visible_at timestamptz NOT NULL, seq bigserial, state text NOT NULL DEFAULT 'created',
    resolved_at timestamptz, last_state_change timestamptz NOT NULL DEFAULT now(), order_key bigint,
    num_retries int NOT NULL DEFAULT 0, lease_until timestamptz, failed_at timestamptz, payload jsonb NOT NULL
  ) WITH (fillfactor = ${d.fillfactor})`)
  await db.query(`CREATE UNIQUE INDEX ON lease_ev (id, project)`)
  await db.query(`CREATE INDEX ON lease_ev (order_key, seq) WHERE order_key IS NOT NULL AND resolved_at IS NULL`)
  for (const columns of d.indexes) await db.query(`CREATE INDEX ON lease_ev ${columns}`)
  await db.query(
    `INSERT INTO lease_ev (project, order_key, visible_at, payload)
     SELECT 'p', i, now() - interval '1 hour' + i * interval '1 ms',
            jsonb_build_object('operation', 'update', 'entity', 'Article', 'id', i, 'values', jsonb_build_object('title', 'Article ' || i))
     FROM generate_series(1, $1::int) i`,
    [EVENTS],
  )
  if (inFlight > 0)
    await db.query(`UPDATE lease_ev SET state = 'processing', ${d.lease} = now() + interval '1 hour' WHERE seq <= $1`, [inFlight])
  await db.query(`VACUUM ANALYZE lease_ev`)
}

/** One worker: claims up to `batch` events and records them delivered, until the deadline or an empty claim. */
async function work(db: pg.Client, d: Design, batch: number, until: number): Promise<number> {
  const claim = `WITH c AS (
      UPDATE lease_ev e SET state = 'processing', ${d.lease} = now() + interval '30 s', last_state_change = now()
      WHERE (e.id, e.project) IN (
        SELECT id, project FROM lease_ev d WHERE d.project = 'p' AND ${d.due}
          AND NOT EXISTS (SELECT 1 FROM lease_ev k WHERE k.order_key = d.order_key AND k.resolved_at IS NULL AND k.seq < d.seq)
        ORDER BY d.priority DESC, d.visible_at, d.seq LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED)
      RETURNING e.id, e.${d.lease}::text AS lease)
    SELECT id, lease FROM c`
  const clear = d.lease === 'lease_until' ? ', lease_until = NULL' : ''
  const record = `UPDATE lease_ev e SET state = 'succeed', resolved_at = now(), last_state_change = now(), num_retries = e.num_retries + 1${clear}
    WHERE e.id = ANY($1::uuid[]) AND e.project = 'p' AND e.state = 'processing' AND e.${d.lease} = $2::timestamptz`
  let done = 0
  while (performance.now() < until) {
    const { rows } = await db.query<{ id: string; lease: string }>(claim, [batch])
    if (rows.length === 0) break
    const r = await db.query(record, [rows.map(x => x.id), rows[0]?.lease])
    done += r.rowCount ?? 0
  }
  await db.query('SELECT pg_stat_force_next_flush()')
  return done
}

type Cell = { design: string; claimSize: number; inFlight: number; perSecond: number; pgMicros: number; updates: number; hot: number }

async function measure(url: string, admin: pg.Client, database: string, d: Design, batch: number, inFlight: number): Promise<Cell> {
  const setup = new pg.Client({ connectionString: url })
  await setup.connect()
  const workers = Array.from({ length: WORKERS }, () => new pg.Client({ connectionString: url }))
  try {
    await prepare(setup, d, inFlight)
    await Promise.all(workers.map(w => w.connect()))
    const counters = `SELECT n_tup_upd::float8 AS upd, n_tup_hot_upd::float8 AS hot FROM pg_stat_user_tables WHERE relname = 'lease_ev'`
    await setup.query('SELECT pg_stat_clear_snapshot()')
    const before = (await setup.query<{ upd: number; hot: number }>(counters)).rows[0] ?? { upd: 0, hot: 0 }
    const meter = createCpuMeter(admin, database, async () => 0)
    const start = await meter.start()
    const t0 = performance.now()
    const counts = await Promise.all(workers.map(w => work(w, d, batch, t0 + RUN_MS)))
    const seconds = (performance.now() - t0) / 1000
    const cpu = await meter.stop(start)
    await setup.query('SELECT pg_stat_clear_snapshot()')
    const after = (await setup.query<{ upd: number; hot: number }>(counters)).rows[0] ?? before
    const events = counts.reduce((a, b) => a + b, 0)
    const updates = after.upd - before.upd
    return {
      design: d.name,
      claimSize: batch,
      inFlight,
      perSecond: Math.round(events / seconds),
      pgMicros: Math.round((cpu.postgresMs * 1000) / Math.max(1, events)),
      updates: updates / Math.max(1, events),
      hot: updates > 0 ? (after.hot - before.hot) / updates : 0,
    }
  } finally {
    await Promise.all(workers.map(w => w.end().catch(() => {})))
    await setup.end()
  }
}

const server = await startPostgres()
const database = 'bench_lease_design'
const url = await server.freshDatabase(database)
const admin = new pg.Client({ connectionString: server.adminUrl })
await admin.connect()
const cells: Cell[][] = []
try {
  console.error(
    `lease-design: Postgres ${server.version} (${server.source}), ${WORKERS} workers, ${EVENTS} events, ${RUN_MS / 1000} s a cell, ${ROUNDS} rounds`,
  )
  for (const claimSize of CLAIM_SIZES)
    for (const inFlight of IN_FLIGHT) {
      const rounds = DESIGNS.map(() => [] as Cell[])
      for (let round = 1; round <= ROUNDS; round++)
        for (const [i, d] of DESIGNS.entries()) {
          const cell = await measure(url, admin, database, d, claimSize, inFlight)
          console.error(`lease-design: round ${round}, ${d.name}, ${claimSize} a claim, ${inFlight} in flight: ${cell.perSecond}/s`)
          rounds[i]?.push(cell)
        }
      cells.push(...rounds)
    }
} finally {
  await admin.end()
  await server.close()
}

const head = ['design', 'per claim', 'in flight', 'events/s', 'PG µs/event', 'updates/event', 'HOT']
const rows = cells.flatMap(rs => {
  const c = rs[0]
  if (!c) return []
  const m = (f: (c: Cell) => number) => summary(rs.map(f)).median
  return [
    [
      c.design,
      String(c.claimSize),
      String(c.inFlight),
      String(Math.round(m(c => c.perSecond))),
      String(Math.round(m(c => c.pgMicros))),
      m(c => c.updates).toFixed(2),
      `${Math.round(m(c => c.hot) * 100)}%`,
    ],
  ]
})
console.log(table(head, rows))
