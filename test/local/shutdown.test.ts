// `npm start` stopped by a signal with eight deliveries in flight: it waits for them (or their timeout),
// records every outcome, hands back what it had not started, stops Postgres last and leaves no process;
// a restart on the same data directory never sends a delivered event again.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { ServerResponse } from 'node:http'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { useReceiver } from '../helpers/harness.js'
import type { ReceivedRequest } from '../helpers/receiver.js'
import { until } from '../helpers/wait.js'
import { createPayload, TX } from '../fixtures/schemas.js'

/** The target's timeout: the slowest in-flight delivery ends by then. */
const TIMEOUT_MS = 3_000
/** Allowance beyond it for recording, releasing and stopping the queue and Postgres. */
const STOP_ALLOWANCE_MS = 12_000
const EVENTS = 20
const IN_FLIGHT = 8
const REPO = new URL('../../', import.meta.url).pathname

type Held = { req: ReceivedRequest; res: ServerResponse }
/** Requests held open, not yet answered. */
let held: Held[] = []
/** Whether the receiver answers at once (a restarted stack) or holds every request. */
let answerAtOnce = false
const children: ChildProcess[] = []
const dirs: string[] = []

const rx = useReceiver((req, res) => {
  if (answerAtOnce) return void res.end()
  held.push({ req, res })
})
afterEach(() => {
  // A failed test must not leave a stack behind: the whole group goes (its Postgres guard follows).
  for (const c of children.splice(0)) if (c.pid && c.exitCode === null && c.signalCode === null) signalGroup(c.pid, 'SIGKILL')
})
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true })
})

const eventIdOf = (r: ReceivedRequest): string => r.body.events[0].meta.eventId

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal)
  } catch {
    // the group is gone
  }
}

function alive(pid: number, group = false): boolean {
  try {
    process.kill(group ? -pid : pid, 0)
    return true
  } catch {
    return false
  }
}

type Started = { child: ChildProcess; url: string; postmaster: number; output: () => string; exited: Promise<number | null> }

/** `npm start` in its own process group (as a terminal runs it), on an embedded Postgres in `dataDir`. */
async function npmStart(dataDir: string): Promise<Started> {
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'warn' }
  // Everything embedded: the test is about the stack's own Postgres and queue.
  for (const k of ['DATABASE_URL', 'SIGNAL_QUEUE_URL', 'AWS_ENDPOINT_URL_SQS', 'PORT', 'PUSHGATEWAY_URL']) delete env[k]
  const child = spawn('npm', ['start', '--', '--port', '0', '--data-dir', dataDir, '--sweep-interval', '3600'], {
    cwd: REPO,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.push(child)
  let out = ''
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString()
  })
  child.stderr?.on('data', (c: Buffer) => {
    out += c.toString()
  })
  const exited = new Promise<number | null>(resolve => child.once('exit', code => resolve(code)))
  await until('the stack to be ready', () => out.includes('ready; Ctrl-C to stop') || child.exitCode !== null, 90_000)
  const url = /POST (http:\/\/127\.0\.0\.1:\d+)\/enqueue/.exec(out)?.[1]
  if (!url) throw new Error(`the stack did not start:\n${out}`)
  const postmaster = Number((await readFile(join(dataDir, 'pgdata', 'postmaster.pid'), 'utf8')).split('\n')[0])
  return { child, url, postmaster, output: () => out, exited }
}

async function post(url: string, method: string, body: unknown): Promise<void> {
  const res = await fetch(url, {
    method,
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
    signal: AbortSignal.timeout(10_000),
  })
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${await res.text()}`)
}

async function states(url: string, project: string): Promise<Record<string, number>> {
  const res = await fetch(`${url}/events/${project}`, { signal: AbortSignal.timeout(10_000) })
  return (await res.json()) as Record<string, number>
}

async function stopsLikeAService(project: string, send: (s: Started) => void) {
  const dataDir = await mkdtemp(join(tmpdir(), 'actions-shutdown-'))
  dirs.push(dataDir)
  held = []
  answerAtOnce = false
  rx.requests.length = 0
  const first = await npmStart(dataDir)
  const pgid = first.child.pid ?? 0
  await post(`${first.url}/schema/${project}`, 'PUT', {
    targets: {
      hook: {
        type: 'webhook',
        name: 'hook',
        url: `${rx.url}/hook`,
        timeoutMs: TIMEOUT_MS,
        batchSize: 1,
        maxAttempts: 5,
        initialRepeatIntervalMs: 1_000,
      },
    },
    triggers: {
      created: { type: 'basic', name: 'created', entity: 'Article', create: true, delete: false, update: false, target: 'hook' },
    },
  })
  await post(`${first.url}/enqueue`, 'POST', {
    project,
    transactionId: TX,
    events: Array.from({ length: EVENTS }, (_, i) => ({ trigger: 'created', payload: createPayload(i) })),
  })
  await until('eight deliveries in flight', () => held.length >= IN_FLIGHT, 30_000)
  expect(held).toHaveLength(IN_FLIGHT)

  const signalledAt = Date.now()
  send(first)
  // Half of the in-flight deliveries are answered while the stack stops; the others reach their timeout.
  await new Promise(r => setTimeout(r, 300))
  const answered = held.splice(0, IN_FLIGHT / 2)
  for (const h of answered) h.res.end()
  const code = await Promise.race([first.exited, new Promise<'hung'>(r => setTimeout(() => r('hung'), TIMEOUT_MS + STOP_ALLOWANCE_MS))])
  expect(code, first.output()).toBe(0)
  expect(Date.now() - signalledAt).toBeLessThan(TIMEOUT_MS + STOP_ALLOWANCE_MS)
  for (const h of held) h.res.destroy()
  held = []
  await until('the process group to be gone', () => !alive(pgid, true), 5_000)
  await until('the postmaster to be gone', () => !alive(first.postmaster), 5_000)
  expect(first.output()).toMatch(/stopping \(SIG(TERM|INT)\)…[^]*\nstopped\n$/)
  expect(first.output()).not.toMatch(/crashed|Local request failed|did not finish in time/)
  // Nothing was delivered after the signal: claims not started were handed back, not sent.
  expect(rx.requests).toHaveLength(IN_FLIGHT)

  // Restart on the same data: everything not yet delivered is delivered once, nothing delivered is sent again.
  const delivered = new Set(answered.map(h => eventIdOf(h.req)))
  rx.requests.length = 0
  answerAtOnce = true
  const second = await npmStart(dataDir)
  await until('every event to be delivered', async () => (await states(second.url, project)).succeed === EVENTS, 30_000)
  const resent = rx.requests.map(eventIdOf)
  expect(resent.filter(id => delivered.has(id))).toEqual([])
  expect(resent).toHaveLength(EVENTS - delivered.size)
  expect(new Set(resent).size).toBe(resent.length)
  signalGroup(second.child.pid ?? 0, 'SIGTERM')
  expect(await Promise.race([second.exited, new Promise<'hung'>(r => setTimeout(() => r('hung'), STOP_ALLOWANCE_MS))])).toBe(0)
  await until('the second postmaster to be gone', () => !alive(second.postmaster), 5_000)
}

describe('npm start under a signal', () => {
  it("stops on SIGTERM to npm's pid after its in-flight deliveries, records them, and leaves no process", async () => {
    await stopsLikeAService('term', s => {
      s.child.kill('SIGTERM')
    })
  }, 180_000)

  it('stops on SIGINT to the whole process group (Ctrl-C) with Postgres stopped last', async () => {
    await stopsLikeAService('int', s => {
      signalGroup(s.child.pid ?? 0, 'SIGINT')
    })
  }, 180_000)
})
