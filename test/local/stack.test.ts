// The local stack's HTTP edge and listeners: bad input gets a 4xx and a logged reason, never a 500,
// and nothing listens beyond 127.0.0.1.
import { readFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startLocalStack, type LocalStack } from '../../local/stack.js'
import { useDatabase } from '../helpers/harness.js'
import { startSilentServer } from '../helpers/net.js'
import { logCapture, type CapturedLogs } from '../helpers/runtime.js'
import { TX } from '../fixtures/schemas.js'

const db = useDatabase()
let stack: LocalStack
let logs: CapturedLogs
// Short here, so a request that stops arriving is cut within the test; Node checks every quarter of it.
const REQUEST_TIMEOUT_MS = 2_000

/** Sends `parts` over a raw connection (a number waits that many ms) and reads until the server closes it. */
async function rawRequest(parts: Array<string | number>): Promise<{ text: string; ms: number }> {
  const socket = connect(Number(new URL(stack.url).port), '127.0.0.1')
  let text = ''
  socket.setEncoding('utf8').on('data', (d: string) => {
    text += d
  })
  const closed = new Promise<void>(resolve => socket.once('close', () => resolve()))
  socket.on('error', () => {})
  const start = performance.now()
  for (const p of parts) {
    if (typeof p === 'number') await sleep(p)
    else socket.write(p)
  }
  const ended = await Promise.race([closed.then(() => true), sleep(REQUEST_TIMEOUT_MS * 4).then(() => false)])
  socket.destroy()
  if (!ended) throw new Error('the server neither answered nor closed the connection')
  return { text, ms: performance.now() - start }
}

beforeAll(async () => {
  const capture = logCapture()
  logs = capture.captureLogs()
  stack = await startLocalStack({
    env: { DATABASE_URL: db.url, LOG_LEVEL: 'warn', MAX_TARGET_TIMEOUT_MS: '90000' },
    port: 0,
    sweepIntervalMs: 3_600_000,
    logSink: capture.sink,
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
  })
})
afterAll(async () => {
  await stack.stop()
  logs.restore()
})

async function send(method: string, path: string, body?: string | Uint8Array): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(stack.url + path, { method, ...(body === undefined ? {} : { body }), signal: AbortSignal.timeout(20_000) })
  return { status: res.status, json: (await res.json()) as Record<string, unknown> }
}

describe("the local stack's HTTP endpoint", () => {
  it('answers 408 and closes a request that stops arriving, at its time limit and not before', async () => {
    const head = (length: number) =>
      `POST /enqueue HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${length}\r\n\r\n`
    logs.lines.length = 0
    // Half of the body, then nothing.
    const stalled = await rawRequest([head(10), '{"proj'])
    expect(stalled.text).toMatch(/^HTTP\/1\.1 408 /)
    expect(stalled.ms).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50)
    expect(stalled.ms).toBeLessThan(REQUEST_TIMEOUT_MS * 2)
    expect(logs.records().filter(r => r.level === 'error')).toEqual([])
    expect(logs.records().filter(r => r.msg === 'Refused a local request')).toMatchObject([{ level: 'warn', status: 408 }])
    // Slow but complete within the limit: the handler gets it (an invalid enqueue: 400, not 408).
    const body = '{"project":"p"}'
    const slow = await rawRequest([head(body.length), body.slice(0, 5), REQUEST_TIMEOUT_MS / 2, body.slice(5)])
    expect(slow.text).toMatch(/^HTTP\/1\.1 400 /)
  })

  it('answers bad requests with a 4xx and logs the reason without quoting the body', async () => {
    const secret = 'https://hooks.example/SECRET-TOKEN'
    const cases: Array<[string, string, string | Uint8Array | undefined, number]> = [
      ['POST', '/enqueue', `{"project": "p", "url": "${secret}" oops`, 400],
      ['PUT', '/schema/p', `{"targets": {"t": {"url": "${secret}"`, 400],
      [
        'PUT',
        '/schema/p',
        JSON.stringify({ targets: { t: { type: 'webhook', name: 't', url: secret, timeoutMs: -1 } }, triggers: {} }),
        400,
      ],
      ['POST', '/enqueue', JSON.stringify({ project: 'nobody', transactionId: TX, events: [{ trigger: secret, payload: {} }] }), 400],
      ['POST', '/enqueue', new Uint8Array(6 * 1024 * 1024 + 1).fill(32), 413],
      ['GET', '/events/%E0%A4%A', undefined, 400],
      ['GET', '/events/a%00b', undefined, 400],
      ['GET', '/nowhere', undefined, 404],
      ['DELETE', '/enqueue', undefined, 404],
    ]
    for (const [method, path, body, status] of cases) {
      logs.lines.length = 0
      const res = await send(method, path, body)
      expect(res.status, `${method} ${path}`).toBe(status)
      const warned = logs.records().filter(r => r.msg === 'Refused a local request')
      expect(warned, `${method} ${path}`).toHaveLength(1)
      expect(warned[0]).toMatchObject({ level: 'warn', status })
      expect(typeof warned[0]?.reason).toBe('string')
      expect(logs.lines.join('\n')).not.toContain('SECRET-TOKEN')
    }
    expect(logs.records().filter(r => r.level === 'error')).toEqual([])
  })

  it('validates PUT /schema with the configured MAX_TARGET_TIMEOUT_MS, not the default', async () => {
    const schema = (timeoutMs: number) =>
      JSON.stringify({ targets: { t: { type: 'webhook', name: 't', url: 'https://hooks.example/t', timeoutMs } }, triggers: {} })
    // 70 s is over the default bound (60 s); the stack runs with 90 s configured.
    expect(await send('PUT', '/schema/bounded', schema(70_000))).toMatchObject({ status: 200, json: { version: 1 } })
    const over = await send('PUT', '/schema/bounded', schema(95_000))
    expect(over.status).toBe(400)
    expect(over.json.problems).toEqual(['targets.t.timeoutMs: expected an integer from 1 to 90000'])
  })

  it('listens, and lets its SQS emulator listen, on 127.0.0.1 only', async () => {
    // /proc/net/tcp lists listening sockets (state 0A) with their local address; 0100007F is 127.0.0.1.
    const table = await readFile('/proc/net/tcp', 'utf8').catch(() => '')
    const listening = table
      .split('\n')
      .slice(1)
      .map(l => l.trim().split(/\s+/))
      .filter(f => f[3] === '0A')
      .map(f => f[1] ?? '')
    for (const url of [stack.url, stack.sqsEndpoint ?? '']) {
      const port = Number(new URL(url).port).toString(16).toUpperCase().padStart(4, '0')
      const own = listening.filter(local => local.endsWith(`:${port}`))
      expect(own, url).toEqual([`0100007F:${port}`])
    }
    expect(stack.sqsEndpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
  })
})

describe("the local stack's SQS client", () => {
  it('makes SQS_MAX_ATTEMPTS attempts against a queue endpoint that never answers, then fails to start', async () => {
    const silent = await startSilentServer()
    try {
      const started = startLocalStack({
        env: {
          DATABASE_URL: db.url,
          LOG_LEVEL: 'error',
          SIGNAL_QUEUE_URL: `${silent.url}/000000000000/signals`,
          AWS_ENDPOINT_URL_SQS: silent.url,
          AWS_ACCESS_KEY_ID: 'test',
          AWS_SECRET_ACCESS_KEY: 'test',
          SQS_MAX_ATTEMPTS: '3',
          SQS_REQUEST_TIMEOUT_MS: '300',
          SQS_CONNECT_TIMEOUT_MS: '300',
        },
        port: 0,
        sweepIntervalMs: 3_600_000,
      })
      await expect(started).rejects.toThrow()
      // One connection per attempt: the attempt that timed out closed its own.
      expect(silent.accepted()).toBe(3)
    } finally {
      await silent.close()
    }
  })
})
