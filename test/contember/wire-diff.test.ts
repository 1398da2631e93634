// The differential test: the same schema, mutations and receiver answers through a real Contember
// engine's own dispatcher (@contember/engine-server) and through Actions, the requests compared field
// by field: request line, every header line in order with its case, the body's exact text, and each
// event's attempt log, state and retry spacing. What still differs is named in DIFFERENCES, each with
// the words docs/compatibility.md uses for it; anything else that differs fails the test.
import { readFileSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest'
import { storeSchema } from '../../lib/db/schemas.js'
import { setVariables } from '../../lib/db/variables.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { enqueue } from '../../lib/enqueue.js'
import { haveEngine, startEngine, type Engine, type EngineProject, type EngineTarget } from '../helpers/contember.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { headerLines } from '../helpers/receiver.js'

const env = useHarness({ receiver: true, project: 'diff' })
const COMPATIBILITY = readFileSync(new URL('../../docs/compatibility.md', import.meta.url), 'utf8')

/**
 * Every difference that remains, as the test observes it, and the words docs/compatibility.md names it
 * with: a header line only the engine's fetch sends, and how many requests of a project were in flight.
 */
const DIFFERENCES = {
  /** Lines the engine's fetch adds that Actions does not send (compatibility.md, "Request headers"). */
  engineOnlyHeaders: { 'accept-language': '`Accept-Language: *`', 'sec-fetch-mode': '`Sec-Fetch-Mode: cors`' },
  /**
   * `meta` fields 2.0.8 does not send (later upstream versions do, before `createdAt`): Actions sends
   * them, null when the producer gave none (compatibility.md, "Identity fields in meta").
   */
  metaOnlyOurs: { text: '"identityId":null,"ipAddress":null,"userAgent":null,', words: '`identityId`, `ipAddress` and `userAgent`' },
  /** Upstream sends one request of a project at a time; Actions several unless a target sets `maxInFlight: 1`. */
  concurrency: '`maxInFlight: 1`',
} as const

const INTERVAL_MS = 300
/** How long the receiver takes to answer: long enough for requests sent at once to overlap. */
const ANSWER_DELAY_MS = 30
const TOKEN = 'tok-diff-0123456789'
/** Declared in an order jsonb would re-sort, with a variable in a value. */
const HEADERS = { 'X-Custom-Header': 'custom', Authorization: 'Bearer {{TOKEN}}', 'X-A': 'a' }
/** Keys jsonb would re-sort, events nested by payloadPath. */
const BODY = { source: 'cms', nested: { z: 1, a: true } }

/** An event as a request carries it. */
type WireEvent = { meta: { eventId: string } }

/** One request as a side's receiver saw it. */
type Seen = { side: 'engine' | 'actions'; target: string; at: number; lines: Array<[string, string]>; raw: string }

/**
 * The receiver answers each side the same: to hook_a, in turn, a `failures` naming the batch's second
 * event, a `failures` with a key beside it (malformed), a 503, then 200; to hook_b always 200.
 */
const ANSWERS: Array<(events: Array<{ meta: { eventId: string } }>, res: ServerResponse) => void> = [
  (events, res) => json(res, { failures: [{ eventId: events[1]?.meta.eventId, error: 'rejected by the receiver' }] }),
  (_, res) => json(res, { failures: [], ok: true }),
  (_, res) => {
    res.writeHead(503, { 'content-type': 'text/plain' })
    res.end('down for a moment')
  },
]
function json(res: ServerResponse, value: unknown) {
  res.writeHead(200, { 'content-type': 'application/json' })
  res.end(JSON.stringify(value))
}

describe.skipIf(!haveEngine())("Actions on the wire against the engine's own dispatcher", () => {
  let engine: Engine
  let project: EngineProject
  const seen: Seen[] = []

  beforeAll(async () => {
    engine = await startEngine({ pgUrl: inject('pgAdminUrl'), dispatcher: true })
  }, 90_000)
  afterAll(async () => {
    await engine?.stop()
  })

  let mutationDone = () => {}
  const mutated = new Promise<void>(resolve => {
    mutationDone = resolve
  })
  const inFlight = { engine: 0, actions: 0 }
  const most = { engine: 0, actions: 0 }
  /** Records every request and answers it after ANSWER_DELAY_MS, counting each side's requests in flight. */
  function record() {
    const count = { engine: 0, actions: 0 }
    env.rx.respond((req, res) => {
      const [, side, target] = req.path.split('/') as [string, 'engine' | 'actions', string]
      seen.push({ side, target, at: Date.now(), lines: headerLines(res), raw: req.raw })
      most[side] = Math.max(most[side], ++inFlight[side])
      const answer = target === 'hook_a' ? ANSWERS[count[side]++] : undefined
      // The engine's first requests (hook_b's, higher priority) wait for the whole mutation, so its
      // hook_a batch holds both articles however its commits and claims interleave.
      void (target === 'hook_b' ? mutated : Promise.resolve()).then(() =>
        setTimeout(() => {
          inFlight[side]--
          if (answer) answer(req.body.nested?.events ?? [], res)
          else res.end()
        }, ANSWER_DELAY_MS),
      )
    })
  }

  const targets = (side: string): { hook_a: EngineTarget; hook_b: EngineTarget } => ({
    hook_a: {
      url: `${env.rx.url}/${side}/hook_a`,
      headers: HEADERS,
      body: BODY,
      payloadPath: ['nested'],
      batchSize: 2,
      maxAttempts: 6,
      initialRepeatIntervalMs: INTERVAL_MS,
    },
    hook_b: { url: `${env.rx.url}/${side}/hook_b`, initialRepeatIntervalMs: INTERVAL_MS },
  })

  it('sends what the engine sends, but for the differences compatibility.md names', async () => {
    record()
    // The engine: its schema, variables and one content transaction firing four events.
    project = await engine.createProject(targets('engine'))
    await project.actions(`mutation { setVariables(args: { variables: [{ name: "TOKEN", value: "${TOKEN}" }], mode: SET }) { ok } }`)
    await project.content(
      `mutation {
        a: createArticle(data: { title: "One", author: { create: { name: "Ann" } } }) { ok }
        b: createArticle(data: { title: "Two", author: { create: { name: "Bob" } } }) { ok }
      }`,
    )
    mutationDone()
    const engineRows = await waitFor(async () => {
      const rows = await project.outbox()
      return rows.length === 4 && rows.every(r => r.state === 'succeed' || r.state === 'failed') ? rows : undefined
    })

    // Actions: the engine's deployed schema (its URLs pointed at this side), the same variable, and the
    // engine's events as a producer sends them: its ids, transaction, triggers and payloads.
    const { schema } = await project.system<{ schema: { actions: { targets: Record<string, object>; triggers: object } } }>(`{ schema }`)
    const ours = targets('actions')
    await storeSchema(env.deps.db, env.project, {
      targets: Object.fromEntries(
        Object.entries(schema.actions.targets).map(([name, t]) => [name, { ...t, url: ours[name as 'hook_a'].url }]),
      ),
      triggers: schema.actions.triggers,
    })
    await setVariables(env.deps.db, env.project, { TOKEN }, 'set')
    // In the order the engine sent them (its claim breaks ties of priority and due time by heap order).
    const engineEvents = seen
      .filter(r => r.side === 'engine')
      .flatMap(
        r => (JSON.parse(r.raw) as { nested?: { events: WireEvent[] }; events?: WireEvent[] }).nested?.events ?? JSON.parse(r.raw).events,
      )
    const order = [...new Set(engineEvents.map(e => e.meta.eventId))]
    const rowOf = new Map(engineRows.map(r => [r.id, r]))
    // One request per event: each of the engine's events has a transaction of its own mutation.
    for (const id of order) {
      const row = rowOf.get(id)
      await enqueue(env.deps, {
        project: env.project,
        transactionId: row?.transaction_id,
        events: [{ id, trigger: row?.trigger, payload: row?.payload }],
      })
    }
    // Spaced from the enqueue, so a first attempt's lastStateChange set at the claim cannot equal createdAt.
    await new Promise(resolve => setTimeout(resolve, 20))
    const actionsRows = await waitFor(async () => {
      await drainProject(env.deps, env.project, FOREVER)
      const { rows } = await env.deps.db.query<{ id: string; state: string; num_retries: number; log: unknown[] }>(
        `SELECT id, state, num_retries, log FROM actions_event WHERE project = $1`,
        [env.project],
      )
      return rows.length === 4 && rows.every(r => r.state === 'succeed' || r.state === 'failed') ? rows : undefined
    })

    // Requests, target by target in arrival order (across targets the order is not upstream's: each
    // target's batches are its own, docs/compatibility.md "One target per batch").
    for (const target of ['hook_a', 'hook_b']) {
      const requests = (side: Seen['side']) => seen.filter(s => s.side === side && s.target === target)
      const engineSide = requests('engine').map(r => wireView(r, requests('engine')))
      const actionsSide = requests('actions').map(r => wireView(r, requests('actions'), DIFFERENCES.metaOnlyOurs.text))
      expect(engineSide.length, `${target}: requests`).toBe(target === 'hook_a' ? 4 : 2)
      expect(actionsSide, target).toEqual(
        engineSide.map(r => ({ ...r, lines: r.lines.filter(([name]) => !(name.toLowerCase() in DIFFERENCES.engineOnlyHeaders)) })),
      )
    }
    // Each difference named is real, and the docs name it.
    expect(seen.filter(s => s.side === 'actions').every(s => s.raw.includes(DIFFERENCES.metaOnlyOurs.text))).toBe(true)
    expect(seen.some(s => s.side === 'engine' && s.raw.includes('"identityId"'))).toBe(false)
    expect(COMPATIBILITY).toContain(DIFFERENCES.metaOnlyOurs.words)
    const engineNames = seen.filter(s => s.side === 'engine').flatMap(s => s.lines.map(([n]) => n.toLowerCase()))
    for (const [name, words] of Object.entries(DIFFERENCES.engineOnlyHeaders)) {
      expect(engineNames).toContain(name)
      expect(COMPATIBILITY).toContain(words)
    }

    // Each event's attempts as stored: the same log entries (but for the time each took), states and counts.
    const stored = (rows: Array<{ id: string; state: string; num_retries: number; log: unknown[] }>) =>
      Object.fromEntries(
        rows.map(r => [r.id, { state: r.state, num_retries: r.num_retries, log: r.log.map(e => ({ ...(e as object), durationMs: 0 })) }]),
      )
    expect(stored(actionsRows)).toEqual(stored(engineRows))

    // One request at a time from the engine; several at once from Actions, as the docs say, with the option that changes it.
    expect(most.engine).toBe(1)
    expect(most.actions).toBeGreaterThan(1)
    expect(COMPATIBILITY).toContain(DIFFERENCES.concurrency)
  }, 120_000)
})

/** Polls `probe` every 100 ms until it returns a value, for at most 30 s. */
async function waitFor<T>(probe: () => Promise<T | undefined>): Promise<T> {
  const until = Date.now() + 30_000
  while (Date.now() < until) {
    const value = await probe()
    if (value !== undefined) return value
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  throw new Error('timed out waiting for every event to be resolved')
}

/**
 * A request as both sides must agree on it: its header lines, and its body's exact text (without
 * `ours`, text only this side sends, which `content-length` then does not count either) with each event's times replaced by what they mean:
 * `createdAt` as its own placeholder, `lastStateChange` as "the creation" or "the previous failure"
 * (recorded after the previous request's answer and before the retry's interval ran: a claim's own
 * time would come after it), and the gap
 * since the previous request as "the retry interval" when it is at least the interval the attempt
 * count asks for.
 */
function wireView(r: Seen, all: Seen[], ours = '') {
  const previous = all[all.indexOf(r) - 1]
  type Events = Array<{ meta: { createdAt: string; lastStateChange: string; numRetries: number } }>
  const body = JSON.parse(r.raw) as { nested?: { events: Events }; events?: Events }
  // hook_a nests its events by payloadPath; hook_b has none.
  const events = body.nested?.events ?? body.events ?? []
  const times = events.map(({ meta }) => {
    const changed = Date.parse(meta.lastStateChange)
    const meaning =
      meta.lastStateChange === meta.createdAt
        ? 'the creation'
        : previous && changed >= previous.at - 5 && changed < previous.at + INTERVAL_MS
          ? 'the previous failure'
          : `something else (${meta.lastStateChange})`
    return { numRetries: meta.numRetries, lastStateChange: meaning }
  })
  // What only this side sends leaves the body and its length.
  let raw = ours ? r.raw.split(ours).join('') : r.raw
  const cut = r.raw.length - raw.length
  const lines = r.lines.map(([name, value]): [string, string] => [name, name === 'content-length' ? String(Number(value) - cut) : value])
  for (const { meta } of events) {
    raw = raw.replace(`"createdAt":"${meta.createdAt}"`, '"createdAt":"<created>"')
    raw = raw.replace(`"lastStateChange":"${meta.lastStateChange}"`, '"lastStateChange":"<changed>"')
  }
  const retries = Math.max(...times.map(t => t.numRetries))
  const gap = previous ? r.at - previous.at : 0
  return {
    lines,
    raw,
    times,
    spacing: retries === 0 ? 'a first attempt' : gap >= INTERVAL_MS * 2 ** (retries - 1) ? 'the retry interval' : `too soon (${gap} ms)`,
  }
}
