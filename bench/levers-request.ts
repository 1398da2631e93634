/**
 * `npx tsx bench/levers-request.ts [n]`: the request-path choices of lib/delivery/webhook.ts, measured like
 * bench/levers.ts: 8 single-event POSTs in flight to the bench's receiver process, no queue, no Postgres;
 * client CPU per request (least of the rounds) and POST/s (best).
 */
import './quiet.js'
import { Agent, Pool, request, type Dispatcher } from 'undici'
import { dispatchPost } from './bare.js'
import { now } from './clock.js'
import { eventJob } from './jobs.js'
import { startReceiverProcess } from './receiverProcess.js'

const n = Number(process.argv[2] ?? 20_000)
const IN_FLIGHT = 8
const ROUNDS = Number(process.env.LEVER_ROUNDS ?? 3)
const TIMEOUT_MS = 30_000
const LIMIT = 1024 * 1024

type Send = (i: number) => Promise<void>
type Body = Dispatcher.ResponseData['body']

async function forAwait(body: Body): Promise<string> {
  const chunks: Buffer[] = []
  for await (const c of body) chunks.push(Buffer.from(c))
  return Buffer.concat(chunks).toString('utf8')
}

function onData(body: Body): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    body.on('data', (c: Buffer) => {
      size += c.length
      if (size > LIMIT) {
        body.destroy()
        resolve('')
        return
      }
      chunks.push(c)
    })
    body.on('end', () => resolve(chunks.length === 0 ? '' : Buffer.concat(chunks).toString('utf8')))
    body.on('error', reject)
  })
}

async function main(): Promise<void> {
  const receiver = await startReceiverProcess()
  const url = new URL(receiver.url)
  const agentOpts = { keepAliveTimeout: 30_000, keepAliveMaxTimeout: 60_000, connections: 64, pipelining: 1 }
  const agent = new Agent(agentOpts)
  const pool = new Pool(url.origin, agentOpts)
  const headers = { 'content-type': 'application/json', 'user-agent': 'Contember Actions' }
  const body = (i: number) => JSON.stringify({ events: [eventJob(i)] })
  const viaAgent = (i: number, signal: Dispatcher.RequestOptions['signal']) =>
    agent.request({ origin: url.origin, path: url.pathname, method: 'POST', headers, body: body(i), signal })
  const variants: Array<[string, Send]> = [
    [
      'today: request(url) via Agent, AbortController + setTimeout, for-await',
      async i => {
        const abort = new AbortController()
        const timer = setTimeout(() => abort.abort(), TIMEOUT_MS)
        try {
          await forAwait((await request(url, { method: 'POST', headers, body: body(i), dispatcher: agent, signal: abort.signal })).body)
        } finally {
          clearTimeout(timer)
        }
      },
    ],
    [
      'agent.request({origin,path}), AbortController + setTimeout, for-await',
      async i => {
        const abort = new AbortController()
        const timer = setTimeout(() => abort.abort(), TIMEOUT_MS)
        try {
          await forAwait((await viaAgent(i, abort.signal)).body)
        } finally {
          clearTimeout(timer)
        }
      },
    ],
    [
      'pool.request + dump, no timer (the ceiling until the fourth session)',
      async i => {
        await (await pool.request({ origin: url.origin, path: url.pathname, method: 'POST', headers, body: body(i) })).body.dump()
      },
    ],
    [
      'ceiling: pool.dispatch, answer discarded, no timer (bench/bare.ts)',
      async i => {
        await dispatchPost(pool, { origin: url.origin, path: url.pathname, method: 'POST', headers, body: body(i) })
      },
    ],
  ]
  try {
    for (const [, send] of variants) await run(send, Math.min(1_000, n), receiver)
    const results = variants.map(() => [] as Array<Awaited<ReturnType<typeof run>>>)
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, [, send]] of variants.entries()) results[i]?.push(await run(send, n, receiver))
    }
    for (const [i, [label]] of variants.entries()) {
      const rs = results[i] ?? []
      const cpu = rs.map(r => r.cpuMicrosPerRequest).sort((a, b) => a - b)
      const rate = Math.max(...rs.map(r => n / r.seconds))
      console.log(
        `${label.padEnd(72)} ${String(Math.round(rate)).padStart(7)} POST/s (best)  ${(cpu[0] ?? 0).toFixed(1).padStart(6)} µs CPU/req (least)  ${(cpu[Math.floor(cpu.length / 2)] ?? 0).toFixed(1).padStart(6)} (median)`,
      )
    }
  } finally {
    await Promise.all([pool.close(), agent.close()])
    await receiver.stop()
  }
}

async function run(send: Send, count: number, receiver: Awaited<ReturnType<typeof startReceiverProcess>>) {
  await receiver.reset(count)
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
  return { seconds, cpuMicrosPerRequest: (c.user + c.system) / count }
}

main().then(
  () => process.exit(0),
  e => {
    console.error(e)
    process.exit(1)
  },
)
