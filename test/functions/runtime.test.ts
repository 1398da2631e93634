import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { SSMClient } from '@aws-sdk/client-ssm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHandler as createDispatch } from '../../functions/dispatch.js'
import { createHandler as createEnqueue } from '../../functions/enqueue.js'
import { createHandler as createSweeper } from '../../functions/sweeper.js'
import { resolveSecrets } from '../../lib/config.js'
import { ConfigError } from '../../lib/errors.js'
import { createLogger } from '../../lib/log.js'
import { createColdStart, ssmParameterReader } from '../../functions/runtime.js'
import { closeDeps } from '../../lib/deps.js'
import { schemaFor } from '../helpers/events.js'
import { createContext, signalEvent } from '../helpers/lambda.js'
import { startReceiver } from '../helpers/receiver.js'
import { testEnv } from '../helpers/runtime.js'
import { createPayload, TX } from '../fixtures/schemas.js'

// A local endpoint speaking SSM's JSON protocol, so the real SDK client does the call.
let url = ''
const calls: Array<{ target: string; body: { Name: string; WithDecryption: boolean } }> = []
/** What /rotating holds now (a secrets rotation changes it). */
const rotating = { url: '' }
const server = createServer((req, res) => {
  let body = ''
  req.on('data', c => {
    body += c
  })
  req.on('end', () => {
    const parsed = JSON.parse(body)
    calls.push({ target: String(req.headers['x-amz-target']), body: parsed })
    if (parsed.Name === '/rotating') {
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' })
      res.end(JSON.stringify({ Parameter: { Name: parsed.Name, Type: 'SecureString', Value: rotating.url } }))
      return
    }
    if (parsed.Name === '/missing') {
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' })
      res.end(JSON.stringify({ __type: 'ParameterNotFound', message: 'not found' }))
      return
    }
    res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' })
    res.end(JSON.stringify({ Parameter: { Name: parsed.Name, Type: 'SecureString', Value: 'postgres://app:pw-from-ssm@db:5432/app' } }))
  })
})
beforeAll(async () => {
  await new Promise<void>(r => server.listen(0, '127.0.0.1', r))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>(r => server.close(() => r())))
const reader = () =>
  ssmParameterReader(() => new SSMClient({ endpoint: url, region: 'us-east-1', credentials: { accessKeyId: 't', secretAccessKey: 't' } }))

describe('cold-start secrets', () => {
  it('reads DATABASE_URL from the named SecureString, decrypted, when it is unset', async () => {
    const env = await resolveSecrets({ DATABASE_URL_SSM_PARAMETER: '/actions/dev/database-url' }, reader())
    expect(env.DATABASE_URL).toBe('postgres://app:pw-from-ssm@db:5432/app')
    expect(calls.at(-1)).toEqual({ target: 'AmazonSSM.GetParameter', body: { Name: '/actions/dev/database-url', WithDecryption: true } })
  })

  it('keeps an explicit DATABASE_URL and asks nothing', async () => {
    const before = calls.length
    const env = await resolveSecrets({ DATABASE_URL: 'postgres://x/y', DATABASE_URL_SSM_PARAMETER: '/p' }, reader())
    expect(env.DATABASE_URL).toBe('postgres://x/y')
    expect(calls.length).toBe(before)
  })

  it("asks SSM once within the cache's max age, and again once it has passed", async () => {
    const cached = reader()
    const before = calls.length
    expect(await cached('/actions/dev/cached')).toBe('postgres://app:pw-from-ssm@db:5432/app')
    expect(await cached('/actions/dev/cached')).toBe('postgres://app:pw-from-ssm@db:5432/app')
    expect(calls.length - before).toBe(1)
    // Powertools' max age is whole seconds: with 1 s, a read 1.1 s later goes to SSM again.
    const short = ssmParameterReader(
      () => new SSMClient({ endpoint: url, region: 'us-east-1', credentials: { accessKeyId: 't', secretAccessKey: 't' } }),
      1,
    )
    await short('/actions/dev/short')
    await new Promise(r => setTimeout(r, 1_100))
    await short('/actions/dev/short')
    expect(calls.filter(c => c.body.Name === '/actions/dev/short')).toHaveLength(2)
  })

  it('fails the cold start with a config error naming the parameter when it cannot be read', async () => {
    const err = await resolveSecrets({ DATABASE_URL_SSM_PARAMETER: '/missing' }, reader()).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ConfigError)
    expect(String(err)).toContain('DATABASE_URL_SSM_PARAMETER: could not read /missing (ParameterNotFound)')
  })
})

describe('log lines of an invocation', () => {
  it('all carry the Lambda request id of their invocation, metric lines and failure warnings included', async () => {
    // EMF on and an unreachable Pushgateway, so metric lines and a push warning are written too.
    const env = await testEnv({
      CLOUDWATCH_METRICS: 'true',
      PUSHGATEWAY_URL: 'http://127.0.0.1:9',
      PUSHGATEWAY_TIMEOUT_MS: '500',
      BREAKER_FAILURES: '0',
    })
    const rx = await startReceiver((_, res) => {
      res.statusCode = 500
      res.end()
    })
    try {
      await schemaFor(env.deps, 'rid', { t: { url: rx.url, maxAttempts: 1 } })
      const logs = env.captureLogs()
      const first = createContext()
      const second = createContext()
      try {
        await createEnqueue(() => env.deps)(
          { project: 'rid', transactionId: TX, events: [{ trigger: 'to_t', payload: createPayload() }] },
          first,
        )
        await createDispatch(() => env.deps)(signalEvent('rid'), second)
      } finally {
        logs.restore()
      }
      const records = logs.records()
      const ids = records.map(r => r.awsRequestId)
      expect(new Set(ids)).toEqual(new Set([first.awsRequestId, second.awsRequestId]))
      const ofSecond = records.filter(r => r.awsRequestId === second.awsRequestId)
      expect(ofSecond.some(r => r.level === 'error' && r.msg !== 'Could not push metrics to the Pushgateway')).toBe(true)
      expect(ofSecond.some(r => r.msg === 'Could not push metrics to the Pushgateway')).toBe(true)
      expect(ofSecond.some(r => '_aws' in r)).toBe(true)
      // The cold-start logger itself stays without a request id: invocations never share one.
      const after = env.captureLogs()
      env.deps.log.info('between invocations')
      after.restore()
      expect(after.records()).toEqual([expect.not.objectContaining({ awsRequestId: expect.anything() })])
    } finally {
      await rx.close()
      await env.close()
    }
  })

  it('of the sweeper carry its request id too, its sink warnings and its summary included', async () => {
    // An unreachable Pushgateway: the gauge push and the stale-group cleanup both warn.
    const env = await testEnv({ CLOUDWATCH_METRICS: 'true', PUSHGATEWAY_URL: 'http://127.0.0.1:9', PUSHGATEWAY_TIMEOUT_MS: '500' })
    try {
      await schemaFor(env.deps, 'rid-sweep', { t: { url: 'http://127.0.0.1:9/', maxAttempts: 1 } })
      const logs = env.captureLogs()
      const context = createContext()
      try {
        await createSweeper(() => env.deps)({}, context)
      } finally {
        logs.restore()
      }
      const records = logs.records()
      expect(records.some(r => r.msg === 'Sweep finished')).toBe(true)
      expect(records.some(r => r.msg === 'Could not clean up stale metric groups')).toBe(true)
      expect(records.some(r => '_aws' in r)).toBe(true)
      expect(records.filter(r => r.awsRequestId !== context.awsRequestId)).toEqual([])
    } finally {
      await env.close()
    }
  })

  it('go to the sink each logger was given, with no process-wide switch', () => {
    const a: string[] = []
    const b: string[] = []
    createLogger('info', l => {
      a.push(l)
    })
      .child({ who: 'a' })
      .warn('to a')
    createLogger('info', l => {
      b.push(l)
    }).info('to b')
    createLogger('warn', l => {
      b.push(l)
    }).info('filtered out')
    expect(a.map(l => JSON.parse(l).msg)).toEqual(['to a'])
    expect(JSON.parse(a[0] ?? '{}').who).toBe('a')
    expect(b.map(l => JSON.parse(l).msg)).toEqual(['to b'])
  })
})

describe('connections of a frozen environment', () => {
  it('are not held by the sweeper between passes: it closes its idle connections before returning', async () => {
    const env = await testEnv()
    try {
      await schemaFor(env.deps, 'idle', { t: { url: 'http://127.0.0.1:9/' } })
      // Two connections idle in the pool before the pass, as a previous invocation would leave them.
      const held = await Promise.all([env.deps.db.connect(), env.deps.db.connect()])
      for (const c of held) c.release()
      expect(env.deps.db.idleCount).toBe(2)
      const appName = `sweeper-idle-${process.pid}`
      await env.deps.db.query(`SELECT set_config('application_name', $1, false)`, [appName])
      await createSweeper(() => env.deps)({}, createContext())
      expect(env.deps.db.totalCount).toBe(0)
      // The server agrees: no session of this pool is left.
      const { rows } = await env.db.pool.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [appName])
      expect(rows[0]?.n).toBe(0)
    } finally {
      await env.close()
    }
  })
})

describe('secrets rotation', () => {
  it('reads the database URL again, past the cache, once Postgres refuses the login, and rebuilds the deps', async () => {
    const env = await testEnv()
    try {
      // Before the rotation SSM holds credentials the server no longer accepts (here: a role that does not exist).
      const good = new URL(env.db.url)
      const stale = new URL(env.db.url)
      stale.username = 'rotated_away'
      rotating.url = stale.toString()
      const coldStart = createColdStart(
        { DATABASE_URL_SSM_PARAMETER: '/rotating', SIGNAL_QUEUE_URL: env.queue.queueUrl, LOG_LEVEL: 'error' },
        reader(),
      )
      const first = await coldStart.deps()
      const refused = await first.db.query('SELECT 1').then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(refused).toBeInstanceOf(Error)
      // Another failure is no reason to re-read anything.
      expect(coldStart.renewAfter(new Error('connect ECONNREFUSED'))).toBe(false)
      expect(await coldStart.deps()).toBe(first)
      rotating.url = good.toString()
      // Still within the cache's 5 minutes: without the renewal the stale URL would be served again.
      const before = calls.filter(c => c.body.Name === '/rotating').length
      expect(coldStart.renewAfter(new Error('drain failed', { cause: refused }))).toBe(true)
      const second = await coldStart.deps()
      expect(second).not.toBe(first)
      expect(calls.filter(c => c.body.Name === '/rotating').length).toBe(before + 1)
      expect((await second.db.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }])
      await closeDeps(second)
    } finally {
      await env.close()
    }
  })
})
