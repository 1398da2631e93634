/**
 * `npx tsx bench/levers.ts [n]`: what the per-request levers of the webhook client are worth, measured
 * on the request path alone (no queue, no Postgres) against the bench's receiver process. Each variant
 * sends `n` single-event POSTs, 8 in flight, and reports POST/s and this process's CPU per request
 * (CPU per request is the steadier figure on a shared machine). Read-only with respect to lib/: the
 * variants rebuild what lib/delivery/webhook.ts does, step by step.
 */
import './quiet.js'
import { Agent, Pool, request } from 'undici'
import { now } from './clock.js'
import { eventJob } from './jobs.js'
import { startReceiverProcess } from './receiverProcess.js'

const n = Number(process.argv[2] ?? 20_000)
const IN_FLIGHT = 8
const ROUNDS = 3
const TIMEOUT_MS = 30_000

type Send = (i: number) => Promise<void>

type Clients = { url: URL; receiverUrl: string; pool: Pool; piped: Pool; agent: Agent }

async function main(): Promise<void> {
  const receiver = await startReceiverProcess()
  const url = new URL(receiver.url)
  const clients: Clients = {
    url,
    receiverUrl: receiver.url,
    pool: new Pool(url.origin, { connections: IN_FLIGHT, pipelining: 1 }),
    piped: new Pool(url.origin, { connections: 2, pipelining: 4 }),
    agent: new Agent({ keepAliveTimeout: 30_000, keepAliveMaxTimeout: 60_000, connections: 64, pipelining: 1 }),
  }
  const variants = variantsOf(clients)
  try {
    for (const [, send] of variants) await run(send, Math.min(1_000, n), receiver)
    // Interleaved rounds; the least CPU per request of the rounds is the figure least disturbed by other load.
    const results = variants.map(() => [] as Array<Awaited<ReturnType<typeof run>>>)
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, [, send]] of variants.entries()) results[i]?.push(await run(send, n, receiver))
    }
    for (const [i, [label]] of variants.entries()) {
      const rs = results[i] ?? []
      const best = (f: (r: Awaited<ReturnType<typeof run>>) => number) => Math.min(...rs.map(f))
      const rate = Math.max(...rs.map(r => n / r.seconds))
      console.log(
        `${label.padEnd(78)} ${String(Math.round(rate)).padStart(7)} POST/s (best)  ${best(r => r.cpuMicrosPerRequest)
          .toFixed(1)
          .padStart(6)} µs CPU/request (client, least)  receiver ${best(r => r.receiverMicrosPerRequest).toFixed(1)} µs`,
      )
    }
  } finally {
    await Promise.all([clients.pool.close(), clients.piped.close(), clients.agent.close()])
    await receiver.stop()
  }
}

/** The variants, each adding one lever of the webhook client's request path to the ceiling's. */
function variantsOf({ url, receiverUrl, pool, piped, agent }: Clients): Array<[string, Send]> {
  // A stored event as Postgres hands it over today (jsonb parsed into an object) and as text.
  const storedText = JSON.stringify(eventJob(0))
  const post = (p: Pool, body: string, signal?: AbortSignal) =>
    p.request({
      origin: url.origin,
      path: url.pathname,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      ...(signal ? { signal } : {}),
    })
  /** Runs `send` with an AbortController and a timer of its own, as the webhook client does per request. */
  const timed = async (send: (signal: AbortSignal) => Promise<void>) => {
    const abort = new AbortController()
    const timer = setTimeout(() => abort.abort(), TIMEOUT_MS)
    try {
      await send(abort.signal)
    } finally {
      clearTimeout(timer)
    }
  }
  return [
    ['ceiling: Pool.request + dump', async i => (await post(pool, JSON.stringify({ events: [eventJob(i)] }))).body.dump()],
    [
      '+ AbortController and setTimeout per request',
      i => timed(async signal => (await post(pool, JSON.stringify({ events: [eventJob(i)] }), signal)).body.dump()),
    ],
    [
      '+ request(url) through an Agent, body read by for-await (webhook.ts today)',
      i =>
        timed(async signal => {
          const body = JSON.stringify({ events: [eventJob(i)] })
          const r = await request(receiverUrl, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body,
            dispatcher: agent,
            signal,
          })
          const chunks: Buffer[] = []
          for await (const c of r.body) chunks.push(Buffer.from(c))
          Buffer.concat(chunks).toString('utf8')
        }),
    ],
    [
      'ceiling, payload parsed from text then re-serialized',
      async () => (await post(pool, JSON.stringify({ events: [JSON.parse(storedText)] }))).body.dump(),
    ],
    ['ceiling, stored text spliced into the body', async () => (await post(pool, `{"events":[${storedText}]}`)).body.dump()],
    [
      'ceiling, undici pipelining 4 over 2 connections',
      async i => (await post(piped, JSON.stringify({ events: [eventJob(i)] }))).body.dump(),
    ],
  ]
}

async function run(send: Send, count: number, receiver: Awaited<ReturnType<typeof startReceiverProcess>>) {
  await receiver.reset(count)
  const r0 = (await receiver.counts()).cpuMicros
  const c0 = process.cpuUsage()
  const t0 = now()
  let next = 0
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      for (let i = next++; i < count; i = next++) await send(i)
    }),
  )
  const seconds = (now() - t0) / 1000
  const c = process.cpuUsage(c0)
  const r1 = (await receiver.counts()).cpuMicros
  return { seconds, cpuMicrosPerRequest: (c.user + c.system) / count, receiverMicrosPerRequest: (r1 - r0) / count }
}

main().then(
  () => process.exit(0),
  e => {
    console.error(e)
    process.exit(1)
  },
)
