// An experiment, not a contender: what writing the event row once per delivery would save at
// batchSize 50, measured on a table shaped as actions_event (migration 017's columns, indexes and
// fillfactor), before any redesign of the event row. Today each delivery writes the row twice: the
// claim its lease (a HOT update), the record its outcome (a new version with entries in the primary
// key and the resolved index). Two designs write it once:
// - lease table: the claim inserts its leases into a narrow table of their own and leaves the event
//   row alone but for its row lock (SKIP LOCKED, as today); the record writes the outcome into the row
//   and deletes the leases. A claim whose snapshot missed a lease committed meanwhile finds the lease
//   row taken (ON CONFLICT, in id order: no deadlock) and claims fewer events;
// - moved out: the claim leases the row as today; the record moves the resolved row into a table of
//   resolved events (a delete and an insert), so the event table holds only what is unresolved.
// Each is worth building only if it saves at least 30 % of Postgres CPU per event against today's.
// Run: npx tsx bench/row-once.ts (about two minutes; DATABASE_URL, else 127.0.0.1:5432, else embedded).
import pg from 'pg'
import { createCpuMeter } from './cpu.js'
import { startPostgres } from './postgres.js'
import { summary, table } from './stats.js'

type Design = { name: string; tables: string[]; claim: string; record: string }

const COLUMNS = `id uuid NOT NULL DEFAULT gen_random_uuid(), project text NOT NULL, priority int NOT NULL DEFAULT 0,
  visible_at timestamptz NOT NULL, seq bigserial, state text NOT NULL DEFAULT 'created', resolved_at timestamptz,
  last_state_change timestamptz NOT NULL DEFAULT now(), order_key bigint, num_retries int NOT NULL DEFAULT 0,
  lease_until timestamptz, failed_at timestamptz, payload jsonb NOT NULL`
const EVENT_TABLE = [
  `CREATE TABLE row_ev (${COLUMNS}) WITH (fillfactor = 50)`,
  `CREATE UNIQUE INDEX ON row_ev (id, project)`,
  `CREATE INDEX ON row_ev (order_key, seq) WHERE order_key IS NOT NULL AND resolved_at IS NULL`,
  `CREATE INDEX ON row_ev (project, priority DESC, visible_at, seq) WHERE resolved_at IS NULL`,
  `CREATE INDEX ON row_ev (project, failed_at) WHERE failed_at IS NOT NULL`,
  `CREATE INDEX ON row_ev (resolved_at) WHERE resolved_at IS NOT NULL`,
]
/** The due candidates of a claim of `$1` events, `extra` excluding leased ones; rows locked as the engine's claim locks them. */
const candidates = (extra: string) => `SELECT d.ctid FROM row_ev d
  WHERE d.project = 'p' AND d.resolved_at IS NULL AND d.visible_at <= now() AND ${extra}
    AND NOT EXISTS (SELECT 1 FROM row_ev k WHERE k.order_key = d.order_key AND k.resolved_at IS NULL AND k.seq < d.seq)
  ORDER BY d.priority DESC, d.visible_at, d.seq LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED`
const LEASE_DUE = `(d.lease_until IS NULL OR d.lease_until <= now())`

const today: Design = {
  name: 'today: lease and outcome in the row',
  tables: EVENT_TABLE,
  claim: `UPDATE row_ev e SET state = 'processing', lease_until = now() + interval '30 s', last_state_change = now()
    WHERE e.ctid = ANY(ARRAY(${candidates(LEASE_DUE)})) RETURNING e.id, e.lease_until::text AS lease`,
  record: `UPDATE row_ev e SET state = 'succeed', resolved_at = now(), last_state_change = now(), num_retries = e.num_retries + 1, lease_until = NULL
    WHERE e.id = ANY($1::uuid[]) AND e.project = 'p' AND e.state = 'processing' AND e.lease_until = $2::timestamptz`,
}
const leaseTable: Design = {
  name: 'lease table: the row written by the record only',
  tables: [...EVENT_TABLE, `CREATE TABLE row_lease (id uuid PRIMARY KEY, lease_until timestamptz NOT NULL)`],
  claim: `WITH c AS (SELECT d.id FROM row_ev d WHERE d.ctid = ANY(ARRAY(${candidates(
    `NOT EXISTS (SELECT 1 FROM row_lease l WHERE l.id = d.id AND l.lease_until > now())`,
  )})))
    INSERT INTO row_lease (id, lease_until) SELECT id, now() + interval '30 s' FROM c ORDER BY id
    ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until WHERE row_lease.lease_until <= now()
    RETURNING id, lease_until::text AS lease`,
  record: `WITH l AS (DELETE FROM row_lease l WHERE l.id = ANY($1::uuid[]) AND l.lease_until = $2::timestamptz RETURNING l.id)
    UPDATE row_ev e SET state = 'succeed', resolved_at = now(), last_state_change = now(), num_retries = e.num_retries + 1
    FROM l WHERE e.id = l.id AND e.project = 'p'`,
}
const movedOut: Design = {
  name: 'moved out: resolved rows in a table of their own',
  tables: [...EVENT_TABLE, `CREATE TABLE row_done (${COLUMNS})`, `CREATE INDEX ON row_done (resolved_at)`],
  claim: today.claim,
  record: `WITH d AS (DELETE FROM row_ev e WHERE e.id = ANY($1::uuid[]) AND e.project = 'p' AND e.state = 'processing' AND e.lease_until = $2::timestamptz RETURNING e.*)
    INSERT INTO row_done SELECT id, project, priority, visible_at, seq, 'succeed', now(), now(), order_key, num_retries + 1, NULL, failed_at, payload FROM d`,
}
const DESIGNS = [today, leaseTable, movedOut]
/** A batchSize 50 drain's claim and record (one claim statement holds about 16 batches, but the rows written per event are what differs). */
const CLAIM_SIZE = 50
const ROUNDS = 3
const WORKERS = 4
const EVENTS = 100_000
const RUN_MS = 4_000

/** Creates the design's tables and fills the event table with EVENTS due events of distinct ordering keys. */
async function prepare(db: pg.Client, d: Design): Promise<void> {
  await db.query(`DROP TABLE IF EXISTS row_ev, row_lease, row_done`)
  for (const sql of d.tables) await db.query(sql)
  await db.query(
    `INSERT INTO row_ev (project, order_key, visible_at, payload)
     SELECT 'p', i, now() - interval '1 hour' + i * interval '1 ms',
            jsonb_build_object('operation', 'update', 'entity', 'Article', 'id', i, 'values', jsonb_build_object('title', 'Article ' || i))
     FROM generate_series(1, $1::int) i`,
    [EVENTS],
  )
  await db.query(`VACUUM ANALYZE`)
}

/** One worker: claims CLAIM_SIZE events and records them delivered, until the deadline or an empty claim. */
async function work(db: pg.Client, d: Design, until: number): Promise<number> {
  let done = 0
  while (performance.now() < until) {
    const { rows } = await db.query<{ id: string; lease: string }>(d.claim, [CLAIM_SIZE])
    if (rows.length === 0) break
    const r = await db.query(d.record, [rows.map(x => x.id), rows[0]?.lease])
    done += r.rowCount ?? 0
  }
  return done
}

type Cell = { perSecond: number; pgMicros: number }

async function measure(url: string, admin: pg.Client, database: string, d: Design): Promise<Cell> {
  const setup = new pg.Client({ connectionString: url })
  await setup.connect()
  const workers = Array.from({ length: WORKERS }, () => new pg.Client({ connectionString: url }))
  try {
    await prepare(setup, d)
    await Promise.all(workers.map(w => w.connect()))
    const meter = createCpuMeter(admin, database, async () => 0)
    const start = await meter.start()
    const t0 = performance.now()
    const events = (await Promise.all(workers.map(w => work(w, d, t0 + RUN_MS)))).reduce((a, b) => a + b, 0)
    const seconds = (performance.now() - t0) / 1000
    const cpu = await meter.stop(start)
    return { perSecond: Math.round(events / seconds), pgMicros: (cpu.postgresMs * 1000) / Math.max(1, events) }
  } finally {
    await Promise.all(workers.map(w => w.end().catch(() => {})))
    await setup.end()
  }
}

/** Every design ROUNDS times, interleaved, so a slow patch of the machine hits each. */
async function run(): Promise<Cell[][]> {
  const server = await startPostgres()
  const database = 'bench_row_once'
  const url = await server.freshDatabase(database)
  const admin = new pg.Client({ connectionString: server.adminUrl })
  await admin.connect()
  const cells = DESIGNS.map(() => [] as Cell[])
  try {
    console.error(
      `row-once: Postgres ${server.version} (${server.source}), ${WORKERS} workers, ${EVENTS} events, ${RUN_MS / 1000} s a cell`,
    )
    for (let round = 1; round <= ROUNDS; round++)
      for (const [i, d] of DESIGNS.entries()) {
        const cell = await measure(url, admin, database, d)
        console.error(`row-once: round ${round}, ${d.name}: ${cell.perSecond}/s, ${cell.pgMicros.toFixed(1)} µs Postgres per event`)
        cells[i]?.push(cell)
      }
  } finally {
    await admin.end()
    await server.close()
  }
  return cells
}

const cells = await run()
const base = summary(cells[0]?.map(c => c.pgMicros) ?? []).median
const rows = DESIGNS.map((d, i) => {
  const pgMicros = summary(cells[i]?.map(c => c.pgMicros) ?? []).median
  const perSecond = summary(cells[i]?.map(c => c.perSecond) ?? []).median
  return [d.name, String(Math.round(perSecond)), pgMicros.toFixed(1), `${Math.round((1 - pgMicros / base) * 100)}%`]
})
console.log(table(['design', 'events/s', 'PG µs/event', 'saved'], rows))
