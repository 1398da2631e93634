// The claim queue's states (lib/dispatch/claim-state.ts): every transition driven against a real
// Postgres, the state asserted after each step. The queue only claims and releases here; no webhook
// is sent, so the targets point at a port nothing listens on.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import pg from 'pg'
import { getSchemaAndVariables } from '../../lib/db/schemas.js'
import { checkedTransition, ClaimQueueStateError, type ClaimQueueState } from '../../lib/dispatch/claim-state.js'
import { ClaimQueue, type ClaimQueueInput } from '../../lib/dispatch/claims.js'
import type { Claimed } from '../../lib/dispatch/queued-claims.js'
import { resolveTargets } from '../../lib/dispatch/resolve.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'
import { testEnv, type TestEnv } from '../helpers/runtime.js'

let env: TestEnv
let n = 0
let project: string
beforeAll(async () => {
  env = await testEnv()
})
afterAll(async () => {
  await env.close()
})
beforeEach(() => {
  project = `cq${++n}`
})

const NOWHERE = 'http://127.0.0.1:9/never'

/** Stores the project's schema with these targets (and a trigger `to_<name>` for each). */
async function store(targets: Record<string, Record<string, unknown>>): Promise<void> {
  await schemaFor(env.deps, project, Object.fromEntries(Object.entries(targets).map(([name, t]) => [name, { url: NOWHERE, ...t }])))
}

/** A claim queue over the project's stored schema, as a drain builds it, with `input` overriding the defaults. */
async function queueFor(input: Partial<ClaimQueueInput> = {}): Promise<ClaimQueue> {
  const { stored, variables } = await getSchemaAndVariables(env.deps.db, project)
  const resolved = resolveTargets({
    targets: Object.values(stored?.schema.targets ?? {}),
    variables,
    config: env.deps.config,
    remainingMs: Number.POSITIVE_INFINITY,
    log: env.log,
    metrics: env.deps.metrics.forProject(project),
  })
  return new ClaimQueue({
    db: env.deps.db,
    project,
    targets: resolved,
    concurrency: 1,
    maxClaimedBytes: 64 * 1024 * 1024,
    fits: () => true,
    beforeClaim: async () => {},
    onClaimFailures: () => {},
    ...input,
  })
}

/** The next batch the queue hands out; fails the test when it hands out none. */
async function handOut(q: ClaimQueue): Promise<Claimed> {
  const next = await q.next()
  if (typeof next === 'string') throw new Error(`expected a batch, got '${next}' in state '${q.state}'`)
  return next
}

/** Payload bytes of the project's events, in claim order, as the claim measures them. */
async function payloadBytes(): Promise<number[]> {
  const { rows } = await env.deps.db.query<{ bytes: number }>(
    'SELECT octet_length(payload::text) AS bytes FROM actions_event WHERE project = $1 ORDER BY visible_at, seq',
    [project],
  )
  return rows.map(r => r.bytes)
}

async function processing(): Promise<number> {
  return [...(await states(env.deps, project)).values()].filter(s => s.state === 'processing').length
}

/** A promise the test settles by hand: a claim waits on it in beforeClaim. */
function gate(): { promise: Promise<void>; open: () => void; fail: (e: Error) => void } {
  let open = () => {}
  let fail: (e: Error) => void = () => {}
  const promise = new Promise<void>((resolve, reject) => {
    open = resolve
    fail = reject
  })
  return { promise, open, fail }
}

describe('the claim queue moves through named states', () => {
  it('starts ready, is claiming while its claim runs, ready after a claim that took all it asked for, and stopped after stop', async () => {
    // batchSize 100 with one worker: the queue asks for 4 batches, and 500 due events fill them.
    await store({ t: { batchSize: 100 } })
    const q = await queueFor()
    await enqueueMany(env.deps, project, 'to_t', 500)
    expect(q.state).toBe('ready')
    const next = q.next()
    expect(q.state).toBe('claiming')
    expect(await next).toBe('again')
    expect(q.state).toBe('ready')
    expect(q.queued).toBe(4)
    await q.stop()
    expect(q.state).toBe('stopped')
    expect(q.queued).toBe(0)
    expect(await processing()).toBe(0)
    expect(await q.next()).toBe('empty')
  })

  it('goes idle after a claim that found nothing more due, and ready again when the last delivery finishes, claims go back, or claimAgain asks', async () => {
    await store({ t: { batchSize: 10 } })
    const q = await queueFor()
    await enqueueMany(env.deps, project, 'to_t', 2)
    expect(await q.next()).toBe('again')
    expect(q.state).toBe('idle')
    const c = await handOut(q)
    expect(c.batch.events).toHaveLength(2)
    // A delivery under way that is not the last one would not wake it: this one is the last.
    expect(q.state).toBe('idle')
    q.finished(c)
    expect(q.state).toBe('ready')

    await enqueueMany(env.deps, project, 'to_t', 1, 10)
    expect(await q.next()).toBe('again')
    expect(q.state).toBe('idle')
    // A claim that goes back (the breaker paused the target) may make events claimable again.
    await q.releaseTarget('t')
    expect(q.state).toBe('ready')
    // Only the two handed out stay claimed (nothing records their outcomes here); the third is due again.
    expect(await processing()).toBe(2)

    expect(await q.next()).toBe('again')
    expect(q.state).toBe('idle')
    q.finished(await handOut(q))
    expect(await q.next()).toBe('again')
    expect(q.state).toBe('idle')
    // The drain's last look for an ordering key's next event: ready, claiming, and idle again (nothing due).
    expect(await q.claimAgain()).toBe(false)
    expect(q.state).toBe('idle')
    await q.stop()
    expect(q.state).toBe('stopped')
  })

  it('is exhausted when the byte budget cut its claim, and ready again when a delivery frees bytes', async () => {
    await store({ t: { batchSize: 1 } })
    await enqueueMany(env.deps, project, 'to_t', 3)
    const [b0 = 0, b1 = 0, b2 = 0] = await payloadBytes()
    // Room for two of the three batches: the claim stops before the third.
    const q = await queueFor({ maxClaimedBytes: b0 + b1 + Math.floor(b2 / 2) })
    expect(await q.next()).toBe('again')
    expect(q.state).toBe('exhausted')
    expect(q.queued).toBe(2)
    const first = await handOut(q)
    const second = await handOut(q)
    expect(q.state).toBe('exhausted')
    // Another delivery is still under way; the bytes this one frees are enough to ask again.
    q.finished(first)
    expect(q.state).toBe('ready')
    q.finished(second)
    expect(q.state).toBe('ready')
    expect(await q.next()).toBe('again')
    expect(q.queued).toBe(1)
    await q.stop()
    expect(q.state).toBe('stopped')
    // The queued third batch went back; the two handed out stay claimed (nothing records them here).
    expect(await processing()).toBe(2)
  })

  it('is exhausted when no target fits the time left, and stops from there', async () => {
    await store({ t: {} })
    const q = await queueFor({ fits: () => false })
    await enqueueMany(env.deps, project, 'to_t', 1)
    expect(await q.next()).toBe('empty')
    expect(q.state).toBe('exhausted')
    expect(q.leftForTime).toBe(true)
    expect(await processing()).toBe(0)
    await q.stop()
    expect(q.state).toBe('stopped')
  })

  it('stops at once from ready before any claim, and a second stop changes nothing', async () => {
    await store({ t: {} })
    await enqueueMany(env.deps, project, 'to_t', 1)
    const q = await queueFor()
    await q.stop()
    expect(q.state).toBe('stopped')
    // The slice ended, then the drain: stopped twice.
    await q.stop()
    expect(q.state).toBe('stopped')
    expect(await q.next()).toBe('empty')
    expect(await processing()).toBe(0)
  })

  it('is stopping while a stopped claim finishes, then stopped with the claim handed back', async () => {
    const wait = gate()
    await store({ t: { batchSize: 5 } })
    const q = await queueFor({ beforeClaim: () => wait.promise })
    await enqueueMany(env.deps, project, 'to_t', 5)
    const next = q.next()
    expect(q.state).toBe('claiming')
    const stopped = q.stop()
    expect(q.state).toBe('stopping')
    wait.open()
    await stopped
    expect(q.state).toBe('stopped')
    expect(await next).toBe('again')
    expect(q.queued).toBe(0)
    expect(await processing()).toBe(0)
  })

  it('fails when its claim fails, stays failed, and reports the error', async () => {
    // A real pool that was closed: the claim statement cannot run.
    const closed = new pg.Pool({ connectionString: env.db.url, max: 1 })
    await closed.end()
    await store({ t: {} })
    const q = await queueFor({ db: closed })
    await enqueueMany(env.deps, project, 'to_t', 1)
    const next = q.next()
    expect(q.state).toBe('claiming')
    expect(await next).toBe('again')
    expect(q.state).toBe('failed')
    expect(String(q.error)).toMatch(/pool/i)
    expect(await q.next()).toBe('empty')
    await expect(q.claimAgain()).rejects.toBe(q.error)
    await q.stop()
    expect(q.state).toBe('failed')
  })

  it('fails from stopping when the stopped claim fails', async () => {
    const wait = gate()
    await store({ t: {} })
    const q = await queueFor({ beforeClaim: () => wait.promise })
    const next = q.next()
    const stopped = q.stop()
    expect(q.state).toBe('stopping')
    wait.fail(new Error('recorder write failed'))
    await stopped
    expect(q.state).toBe('failed')
    expect(q.error).toEqual(new Error('recorder write failed'))
    expect(await next).toBe('again')
  })

  it('goes from idle to ready when a write frees a slot of a target its maxInFlight cut', async () => {
    await store({ t: { batchSize: 1, maxInFlight: 1 } })
    const q = await queueFor()
    await enqueueMany(env.deps, project, 'to_t', 3)
    expect(await q.next()).toBe('again')
    // One request in flight at most: one batch, and the caps say why the rest waits.
    expect(q.queued).toBe(1)
    expect(q.state).toBe('idle')
    expect(q.nextCapMs()).toBeGreaterThanOrEqual(0)
    // An outcome of another target frees nothing.
    q.recorded([{ target: 'elsewhere' }])
    expect(q.state).toBe('idle')
    q.recorded([{ target: 't' }])
    expect(q.state).toBe('ready')
    await q.stop()
    expect(q.state).toBe('stopped')
  })
})

describe('the claim queue transition table', () => {
  const all: ClaimQueueState[] = ['ready', 'claiming', 'idle', 'exhausted', 'stopping', 'stopped', 'failed']
  const allowed: Record<ClaimQueueState, ClaimQueueState[]> = {
    ready: ['claiming', 'exhausted', 'stopped'],
    claiming: ['ready', 'idle', 'exhausted', 'stopping', 'failed'],
    idle: ['ready', 'stopped'],
    exhausted: ['ready', 'stopped'],
    stopping: ['stopped', 'failed'],
    stopped: [],
    failed: [],
  }

  it('allows exactly the transitions the states describe and refuses every other with an internal error naming both', () => {
    for (const from of all) {
      for (const to of all) {
        if (allowed[from].includes(to)) expect(checkedTransition(from, to)).toBe(to)
        else expect(() => checkedTransition(from, to), `${from} -> ${to}`).toThrow(new ClaimQueueStateError(from, to))
      }
    }
    expect(() => checkedTransition('stopped', 'claiming')).toThrow("Internal error: a claim queue cannot go from 'stopped' to 'claiming'")
    const e = new ClaimQueueStateError('failed', 'ready')
    expect(e).toMatchObject({ name: 'ClaimQueueStateError', from: 'failed', to: 'ready' })
  })
})

describe('the byte budget and empty targets', () => {
  it('does not take a target the budget cut out of a claim for empty: the next claim asks for it while the queue is more than half full', async () => {
    // Two workers: 8 batches queued ahead, 4 of one target at most. a and b fill six batches, and the
    // budget leaves no room for c's, which is due behind them.
    const targets = { a: { batchSize: 1 }, b: { batchSize: 1 }, c: { batchSize: 100 } }
    await store(targets)
    await enqueueMany(env.deps, project, 'to_a', 3)
    await enqueueMany(env.deps, project, 'to_b', 3, 100)
    await enqueueMany(env.deps, project, 'to_c', 1, 200)
    const bytes = await payloadBytes()
    const six = bytes.slice(0, 6).reduce((s, b) => s + b, 0)
    const q = await queueFor({ concurrency: 2, maxClaimedBytes: six + Math.floor((bytes[6] ?? 0) / 2) })
    expect(await q.next()).toBe('again')
    expect(q.state).toBe('exhausted')
    expect(q.queued).toBe(6)
    q.finished(await handOut(q))
    expect(q.state).toBe('ready')
    // Five batches queued, more than half of eight: only a target that may have unclaimed work starts
    // a claim now, and c, cut by the budget, is one.
    const next = q.next()
    expect(q.state).toBe('claiming')
    const a = await next
    await q.settled()
    expect(typeof a === 'string' ? a : a.target.name).toBe('a')
    expect(q.queued).toBe(5)
    // What is queued now: the rest of a and b, and c's batch from that claim.
    const left: string[] = []
    for (let i = 0; i < 20 && q.queued > 0; i++) {
      const c = await q.next()
      if (typeof c === 'string') continue
      left.push(c.target.name)
      q.finished(c)
    }
    expect(left.sort()).toEqual(['a', 'b', 'b', 'b', 'c'])
    await q.stop()
  })
})
