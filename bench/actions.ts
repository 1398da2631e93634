import { randomUUID } from 'node:crypto'
import type { SQSClient } from '@aws-sdk/client-sqs'
import pg from 'pg'
import { loadConfig, type Config } from '../lib/config.js'
import { migrate } from '../lib/db/migrate.js'
import { storeSchema } from '../lib/db/schemas.js'
import { closeDeps, createDeps, type Deps } from '../lib/deps.js'
import { drainProject } from '../lib/dispatch/drain.js'
import { enqueue } from '../lib/enqueue.js'
import { type EnqueueRequest } from '../lib/enqueue/request.js'
import { now } from './clock.js'
import { tableUpdates, updatesBetween, type TableUpdates } from './hot.js'
import { articlePayload } from './jobs.js'
import { countStatements } from './statements.js'
import { timedDelivery, type RunResult, type TimedContext } from './timed.js'

/**
 * How a delivery row orders and keys its events: `entity` (the default ordering, every event its own
 * entity), `none` (`ordering: 'none'`), `keys10` (`entity`, ten events per entity, spread over the backlog).
 */
export type OrderVariant = 'entity' | 'none' | 'keys10'
export const ORDER_VARIANTS: readonly OrderVariant[] = ['entity', 'none', 'keys10']

/** The projects the bench stores schemas for: one webhook target each, at the given batch size and ordering. */
export const project = (batchSize: number, variant: OrderVariant = 'entity') =>
  `bench_b${batchSize}${variant === 'entity' ? '' : `_${variant}`}`
export const BATCH_SIZES = [1, 50] as const

const TRIGGER = 'article_created'
/** The capped row's project: an uncapped target and one with `maxInFlight` beside it. */
export const CAPPED_PROJECT = 'bench_capped'
export const CAPPED_IN_FLIGHT = 2
const CAPPED_TRIGGER = 'article_created_capped'
/** The fan-out row's project: basic triggers on as many entities, so each mutation meets one among many. */
export const FANOUT_PROJECT = 'bench_fanout'
export const FANOUT_TRIGGERS = 1_000
// Enqueue's own cap is 10,000 a request; pre-enqueueing in large requests keeps the untimed part short.
const PREPARE_REQUEST_EVENTS = 5_000

export type ActionsBench = {
  deps: Deps
  config: Config
  /** Statements sent through deps.db (bench/statements.ts). */
  statements: { reset(): void; count(): number }
  /** Stores a project with one webhook target to the receiver at `batchSize` (with `ordering: 'none'` when `unordered`). */
  storeProject(projectName: string, batchSize: number, unordered?: boolean): Promise<void>
  /** Empties the event table (through a pool of its own, so nothing of it is counted). */
  truncate(): Promise<void>
  /**
   * Writes `n` delivered (succeed) events of a project straight into the table and analyzes it: the
   * history a running deployment holds under its retention, so the planner sees a table of that size.
   * `keyed`: each with an ordering key of its own, as enqueue gives events of a target with per-entity order.
   */
  seedHistory(projectName: string, n: number, keyed?: boolean): Promise<void>
  /** The update counters of the bench's database so far, with deps.db's backends flushed first (bench/hot.ts). */
  updates(): Promise<TableUpdates>
  /** Runs `run` and adds the row updates it made (uncounted statements, outside the clock). */
  withUpdates(run: () => Promise<RunResult>): Promise<RunResult>
  /** Counts events of a project by state (uncounted pool). */
  countByState(projectName: string, state: string): Promise<number>
  /** Pre-enqueues `n` events through the real `enqueue`, in large requests, `perKey` events per entity; not timed. */
  prepare(projectName: string, n: number, perKey?: number): Promise<void>
  /**
   * Delivers `n` pre-enqueued events through drainProject at DISPATCH_CONCURRENCY; `beforeTimed` runs
   * after the events are enqueued, before the clock starts (the traced row flushes the enqueue spans).
   */
  deliver(batchSize: number, n: number, variant?: OrderVariant, beforeTimed?: () => Promise<void>): Promise<RunResult>
  /** Delivers `n` events, half to a `maxInFlight: 2` target and half to an uncapped one of the same project (batchSize 1). */
  deliverCappedPair(n: number): Promise<RunResult>
  /**
   * Enqueues `n` events through `enqueue` in requests of `perRequest`, `concurrency` requests at a time:
   * events naming their trigger, or mutations that each fire one of {@link FANOUT_TRIGGERS} basic triggers.
   */
  enqueueThroughput(n: number, perRequest: number, concurrency: number, events?: 'named' | 'mutations'): Promise<RunResult>
  close(): Promise<void>
}

/** What the bench's operations share: the engine's deps, an uncounted pool of its own and the timing context. */
type Bench = {
  deps: Deps
  check: pg.Pool
  ctx: TimedContext
  statements: ActionsBench['statements']
  receiverUrl: string
  withUpdates: ActionsBench['withUpdates']
}

/**
 * Actions over a fresh, migrated database, with its signals going to `signalQueueUrl`; `extraEnv` adds
 * settings to the bench's own (the traced row's OTEL_* keys).
 */
export async function setupActions(
  url: string,
  receiverUrl: string,
  sqs: SQSClient,
  signalQueueUrl: string,
  ctx: TimedContext,
  extraEnv: Record<string, string> = {},
): Promise<ActionsBench> {
  const config = loadConfig({
    DATABASE_URL: url,
    SIGNAL_QUEUE_URL: signalQueueUrl,
    DISPATCH_CONCURRENCY: '8',
    LOG_LEVEL: 'error',
    WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    ...extraEnv,
  })
  const deps = createDeps(config, { sqs })
  await migrate(deps.db)
  const check = new pg.Pool({ connectionString: url, max: 1 })
  const versionNum = Number((await check.query<{ v: string }>('SELECT current_setting($1) AS v', ['server_version_num'])).rows[0]?.v ?? 0)
  const updates = () => tableUpdates(check, [deps.db], versionNum)
  const withUpdates = async (run: () => Promise<RunResult>): Promise<RunResult> => {
    const before = await updates()
    const result = await run()
    return { ...result, updates: updatesBetween(before, await updates()) }
  }
  const b: Bench = { deps, check, ctx, statements: countStatements(deps.db), receiverUrl, withUpdates }
  await storeSchemas(b)
  return {
    deps,
    config,
    statements: b.statements,
    storeProject: (name, batchSize, unordered) => storeProject(b, name, batchSize, unordered),
    truncate: () => truncate(b),
    seedHistory: (name, n, keyed) => seedHistory(b, name, n, keyed),
    updates,
    withUpdates,
    countByState: (name, state) => countByState(b, name, state),
    prepare: (name, n, perKey) => prepare(b, name, n, perKey),
    deliver: (batchSize, n, variant, beforeTimed) => deliver(b, batchSize, n, variant, beforeTimed),
    deliverCappedPair: n => deliverCappedPair(b, n),
    enqueueThroughput: (n, perRequest, concurrency, events) => enqueueThroughput(b, n, perRequest, concurrency, events),
    close: async () => {
      await check.end()
      await closeDeps(deps)
    },
  }
}

/** A basic trigger firing on every created Article, to `target`. */
const onCreate = (name: string, target: string) =>
  ({ type: 'basic', name, target, entity: 'Article', create: true, delete: false, update: false }) as const

/** Every project's schema: the delivery rows' at each batch size and ordering, the capped pair's, the fan-out's. */
async function storeSchemas(b: Bench): Promise<void> {
  for (const batchSize of BATCH_SIZES) {
    for (const variant of ORDER_VARIANTS) await storeProject(b, project(batchSize, variant), batchSize, variant === 'none')
  }
  await storeSchema(b.deps.db, CAPPED_PROJECT, {
    targets: {
      hook: { type: 'webhook', name: 'hook', url: b.receiverUrl },
      capped: { type: 'webhook', name: 'capped', url: b.receiverUrl, maxInFlight: CAPPED_IN_FLIGHT },
    },
    triggers: { [TRIGGER]: onCreate(TRIGGER, 'hook'), [CAPPED_TRIGGER]: onCreate(CAPPED_TRIGGER, 'capped') },
  })
  await storeSchema(b.deps.db, FANOUT_PROJECT, {
    targets: { hook: { type: 'webhook', name: 'hook', url: b.receiverUrl } },
    triggers: Object.fromEntries(
      Array.from({ length: FANOUT_TRIGGERS }, (_, i) => {
        const name = fanOutTrigger(i)
        return [name, { type: 'basic', name, target: 'hook', entity: `Entity${i}`, create: true, delete: false, update: ['title'] }]
      }),
    ),
  })
}

async function storeProject(b: Bench, projectName: string, batchSize: number, unordered = false): Promise<void> {
  await storeSchema(b.deps.db, projectName, {
    targets: { hook: { type: 'webhook', name: 'hook', url: b.receiverUrl, batchSize, ...(unordered ? { ordering: 'none' } : {}) } },
    triggers: { [TRIGGER]: onCreate(TRIGGER, 'hook') },
  })
}

async function truncate(b: Bench): Promise<void> {
  await b.check.query('TRUNCATE actions_event')
}

async function seedHistory(b: Bench, projectName: string, n: number, keyed = false): Promise<void> {
  // Random keys: the statistics of distinct per-entity keys; enqueue's own (SHA-256) never meet them.
  await b.check.query(
    `INSERT INTO actions_event (id, project, transaction_id, schema_version, target, trigger, payload, state, resolved_at, last_state_change, order_key)
     SELECT gen_random_uuid(), $1, gen_random_uuid(), 1, 'hook', $2, jsonb_build_object('operation', 'create', 'entity', 'Article', 'id', i),
            'succeed', now(), now(), CASE WHEN $4::boolean THEN gen_random_uuid() END
     FROM generate_series(1, $3::int) AS i`,
    [projectName, TRIGGER, n, keyed],
  )
  await b.check.query('VACUUM ANALYZE actions_event')
}

async function countByState(b: Bench, projectName: string, state: string): Promise<number> {
  const { rows } = await b.check.query<{ n: number }>('SELECT count(*)::int AS n FROM actions_event WHERE project = $1 AND state = $2', [
    projectName,
    state,
  ])
  return rows[0]?.n ?? 0
}

async function prepare(b: Bench, projectName: string, n: number, perKey = 1): Promise<void> {
  // With several events per entity, an entity's events are spread over the backlog: i mod (n / perKey).
  const keys = Math.max(1, Math.ceil(n / perKey))
  for (let i = 0; i < n; i += PREPARE_REQUEST_EVENTS) {
    const size = Math.min(PREPARE_REQUEST_EVENTS, n - i)
    await enqueue(
      b.deps,
      request(
        projectName,
        Array.from({ length: size }, (_, j) => articlePayload((i + j) % keys)),
      ),
    )
  }
  // Every contender's table is analyzed after its bulk load, as autovacuum would soon do in production.
  await b.check.query('VACUUM ANALYZE actions_event')
}

async function deliver(
  b: Bench,
  batchSize: number,
  n: number,
  variant: OrderVariant = 'entity',
  beforeTimed?: () => Promise<void>,
): Promise<RunResult> {
  const name = project(batchSize, variant)
  await truncate(b)
  await prepare(b, name, n, variant === 'keys10' ? 10 : 1)
  await beforeTimed?.()
  return b.withUpdates(() =>
    timedDelivery(
      b.ctx,
      n,
      async () => {
        // The real dispatch path, without the Lambda clock: drain until nothing is due. With several
        // events per entity a drain may end while the last of them wait for their predecessors' records.
        const drainAll = async () => {
          for (let i = 0; i < 1_000; i++) {
            await drainProject(b.deps, name, { remainingMs: () => Infinity })
            if (variant !== 'keys10' || (await countByState(b, name, 'succeed')) === n) return
          }
        }
        const drain = drainAll()
        return {
          finished: drain,
          stop: async () => {
            await drain
            return (await countByState(b, name, 'succeed')) === n
          },
        }
      },
      b.statements,
    ),
  )
}

async function deliverCappedPair(b: Bench, n: number): Promise<RunResult> {
  await truncate(b)
  const half = Math.floor(n / 2)
  for (let i = 0; i < n; i += PREPARE_REQUEST_EVENTS) {
    const size = Math.min(PREPARE_REQUEST_EVENTS, n - i)
    await enqueue(b.deps, {
      project: CAPPED_PROJECT,
      transactionId: randomUUID(),
      events: Array.from({ length: size }, (_, j) => ({
        trigger: i + j < half ? CAPPED_TRIGGER : TRIGGER,
        payload: articlePayload(i + j),
      })),
    })
  }
  await b.check.query('VACUUM ANALYZE actions_event')
  return timedDelivery(
    b.ctx,
    n,
    async () => {
      const drain = drainProject(b.deps, CAPPED_PROJECT, { remainingMs: () => Infinity })
      return {
        finished: drain,
        stop: async () => {
          await drain
          return (await countByState(b, CAPPED_PROJECT, 'succeed')) === n
        },
      }
    },
    b.statements,
  )
}

async function enqueueThroughput(
  b: Bench,
  n: number,
  perRequest: number,
  concurrency: number,
  events: 'named' | 'mutations' = 'named',
): Promise<RunResult> {
  await truncate(b)
  const projectName = events === 'named' ? project(1) : FANOUT_PROJECT
  // Requests are built beforehand: producing the input is the caller's work, not enqueue's.
  const requests = Array.from({ length: Math.ceil(n / perRequest) }, (_, r) => {
    const ids = Array.from({ length: Math.min(perRequest, n - r * perRequest) }, (_, j) => r * perRequest + j)
    return events === 'named'
      ? request(
          projectName,
          ids.map(i => articlePayload(i)),
        )
      : mutationRequest(ids)
  })
  b.statements.reset()
  const cpuStart = await b.ctx.cpu.start()
  const t0 = now()
  let next = 0
  let note: string | undefined
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let r = next++; r < requests.length; r = next++) await enqueue(b.deps, requests[r])
      }),
    )
  } catch (error) {
    note = `error: ${error instanceof Error ? error.message : String(error)}`
  }
  const seconds = (now() - t0) / 1000
  const cpu = await b.ctx.cpu.stop(cpuStart)
  const written = await countByState(b, projectName, 'created')
  const allDelivered = written === n && !note
  return {
    events: n,
    seconds,
    delivered: written,
    duplicates: 0,
    allDelivered,
    statementsPerEvent: b.statements.count() / n,
    cpu,
    ...(note ? { note } : {}),
  }
}

const fanOutTrigger = (i: number) => `entity_${String(i).padStart(4, '0')}_changed`

/** Mutations without trigger names, as a content API that knows none sends them; mutation i fires the trigger of Entity<i mod 1,000>. */
function mutationRequest(ids: number[]): EnqueueRequest {
  return {
    project: FANOUT_PROJECT,
    transactionId: randomUUID(),
    events: ids.map(i => ({
      payload: { operation: 'create', entity: `Entity${i % FANOUT_TRIGGERS}`, id: i, values: { title: `Article ${i}` } },
    })),
  }
}

/** An enqueue request as a content API sends one: a transaction's events for one project. */
export function request(projectName: string, payloads: Array<EnqueueRequest['events'][number]['payload']>): EnqueueRequest {
  return { project: projectName, transactionId: randomUUID(), events: payloads.map(payload => ({ trigger: TRIGGER, payload })) }
}
