import { Agent, buildConnector } from 'undici'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../../lib/config.js'
import { setVariables } from '../../lib/db/variables.js'
import { DESTINATION_NOT_ALLOWED, DestinationNotAllowedError, guardedConnector, isAllowedAddress, parseNetworks, type Network } from '../../lib/delivery/egress.js'
import { closeDeps, createDeps, type Deps } from '../../lib/deps.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'
import { testEnv, type TestEnv } from '../helpers/runtime.js'

const none: Network[] = []
const nets = (list: string) => parseNetworks(list).networks

describe('the guard decision', () => {
  it.each([
    '127.0.0.1', '127.8.9.10', '::1', '[::1]', '::ffff:127.0.0.1', '::ffff:7f00:1', '169.254.169.254', '10.0.0.1', '172.16.5.4',
    '172.31.255.255', '192.168.1.1', '100.64.0.1', '100.127.255.254', '0.0.0.0', '::', '224.0.0.1', '239.255.255.250',
    '255.255.255.255', '240.0.0.1', '192.0.2.1', '198.51.100.7', '203.0.113.9', '198.18.0.1', '198.19.255.1', '192.0.0.8',
    '2001:db8::1', 'fc00::1', 'fd12:3456::1', 'fe80::1', 'fe80::1%eth0', 'ff02::1', '::ffff:10.0.0.1', '::ffff:169.254.169.254',
    '64:ff9b::a9fe:a9fe', '64:ff9b::127.0.0.1', '2002:7f00:1::1', '2002:a00:1::1', '2002:a9fe:a9fe::', '2001::1', '64:ff9b:1::1',
    'not-an-address', '',
  ])('refuses %s', address => {
    expect(isAllowedAddress(address, none)).toBe(false)
  })

  it.each(['8.8.8.8', '1.1.1.1', '93.184.216.34', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1'])('allows the public address %s', address => {
    expect(isAllowedAddress(address, none)).toBe(true)
  })

  it('opens exactly the ranges WEBHOOK_ALLOWED_NETWORKS names, mapped IPv6 forms included', () => {
    const loopback = nets('127.0.0.0/8')
    expect(['127.0.0.1', '127.255.0.1', '::ffff:127.0.0.1'].every(a => isAllowedAddress(a, loopback))).toBe(true)
    expect(['::1', '10.0.0.1', '169.254.169.254'].some(a => isAllowedAddress(a, loopback))).toBe(false)
    const office = nets('10.1.0.0/16, fd00::/8')
    expect(isAllowedAddress('10.1.2.3', office)).toBe(true)
    expect(isAllowedAddress('10.2.0.1', office)).toBe(false)
    expect(isAllowedAddress('fd00::5', office)).toBe(true)
    expect(isAllowedAddress('fc00::5', office)).toBe(false)
  })

  it('parses comma or space separated ranges and reports the positions of bad entries', () => {
    expect(parseNetworks('127.0.0.0/8 ::1/128,10.0.0.0/8').networks).toHaveLength(3)
    expect(parseNetworks('').networks).toEqual([])
    expect(parseNetworks('10.0.0.0/8, 10.0.0.0/33 nonsense ::1/129 1.2.3.4/08x').invalid).toEqual([2, 3, 4, 5])
  })

  it('fails the cold start on a bad WEBHOOK_ALLOWED_NETWORKS, naming the key and not the value', () => {
    const err = (() => { try { loadConfig({ DATABASE_URL: 'postgres://x/y', SIGNAL_QUEUE_URL: 'http://q/1', WEBHOOK_ALLOWED_NETWORKS: '10.0.0.0/8 secret-ish' }) } catch (e) { return e } })()
    expect(err).toBeInstanceOf(ConfigError)
    expect(String(err)).toMatch(/WEBHOOK_ALLOWED_NETWORKS: expected CIDR ranges.*entry 2/)
    expect(String(err)).not.toContain('secret-ish')
  })
})

/** An inner connector that opens nothing: it records the pinned destination and fails. */
function tripwire() {
  const calls: buildConnector.Options[] = []
  const connect: buildConnector.connector = (options, callback) => {
    calls.push(options)
    callback(new Error('tripwire: no socket in this test'), null)
  }
  return { calls, connect }
}

function connectVia(connector: buildConnector.connector, hostname: string): Promise<Error | null> {
  return new Promise(resolve => connector({ hostname, host: `${hostname}:443`, protocol: 'https:', port: '443' }, (...args) => resolve(args[0])))
}

describe('the connector', () => {
  it('refuses a blocked IP literal before any socket is opened', async () => {
    const wire = tripwire()
    const lookups: string[] = []
    const connector = guardedConnector(none, { connect: wire.connect, lookup: async h => { lookups.push(h); return [] } })
    for (const literal of ['169.254.169.254', '10.0.0.1', '127.0.0.1', '::1', '::ffff:7f00:1']) {
      const err = await connectVia(connector, literal)
      expect(err).toBeInstanceOf(DestinationNotAllowedError)
      expect(err?.message).toBe(DESTINATION_NOT_ALLOWED)
    }
    expect(wire.calls).toEqual([])
    // Literals are checked as they are: nothing to resolve.
    expect(lookups).toEqual([])
  })

  it('refuses a name whose every address is blocked, and pins a mixed answer to its allowed address with the name kept for SNI', async () => {
    const wire = tripwire()
    const answers: Record<string, string[]> = { 'metadata.example': ['169.254.169.254'], 'mixed.example': ['10.0.0.5', '93.184.216.34'] }
    const connector = guardedConnector(none, { connect: wire.connect, lookup: async h => answers[h] ?? [] })
    expect(await connectVia(connector, 'metadata.example')).toBeInstanceOf(DestinationNotAllowedError)
    expect(wire.calls).toEqual([])
    expect(await connectVia(connector, 'mixed.example')).toHaveProperty('message', 'tripwire: no socket in this test')
    expect(wire.calls).toEqual([expect.objectContaining({ hostname: '93.184.216.34', host: 'mixed.example:443' })])
  })

  it('resolves localhost through the system resolver and refuses it', async () => {
    const wire = tripwire()
    expect(await connectVia(guardedConnector(none, { connect: wire.connect }), 'localhost')).toBeInstanceOf(DestinationNotAllowedError)
    expect(wire.calls).toEqual([])
  })
})

describe('deliveries through the guard', () => {
  let env: TestEnv
  let rx: Receiver
  let project: string
  let n = 0
  const forever = { remainingMs: () => Number.POSITIVE_INFINITY }
  const opened: Deps[] = []
  beforeAll(async () => {
    env = await testEnv({ LEASE_MARGIN_MS: '1000' })
    rx = await startReceiver()
  })
  afterAll(async () => {
    for (const d of opened) await d.http.close()
    await rx.close()
    await env.close()
  })
  beforeEach(() => {
    project = `g${++n}`
    rx.requests.length = 0
  })
  const deps = () => env.deps
  /** The runtime's deps with the dispatcher a cold start builds from this WEBHOOK_ALLOWED_NETWORKS. */
  const guarded = (allowed: string, http?: Agent): Deps => {
    const d = { ...createDeps({ ...deps().config, WEBHOOK_ALLOWED_NETWORKS: allowed }, { db: deps().db, signals: deps().signals, metrics: deps().metrics, log: deps().log }), ...(http ? { http } : {}) }
    opened.push(d)
    return d
  }
  const port = () => new URL(rx.url).port

  async function attemptEach(d: Deps, urls: string[]): Promise<Array<string | undefined>> {
    await schemaFor(deps(), project, Object.fromEntries(urls.map((url, i) => [`t${i}`, { url, maxAttempts: 3 }])))
    const ids: string[] = []
    for (let i = 0; i < urls.length; i++) ids.push(...await enqueueMany(deps(), project, `to_t${i}`, 1))
    await drainProject(d, project, forever)
    const rows = await states(deps(), project)
    return ids.map(id => {
      const row = rows.get(id)
      const entry = row?.log[0] as { errorMessage?: string } | undefined
      return row?.state === 'retrying' ? entry?.errorMessage : row?.state
    })
  }

  it('refuses loopback in every spelling with "Destination not allowed" when nothing is allowed, and nothing reaches the receiver', async () => {
    const logs = env.captureLogs()
    const urls = [rx.url, `http://[::1]:${port()}/`, `http://[::ffff:127.0.0.1]:${port()}/`, `http://localhost:${port()}/`, `http://2130706433:${port()}/`, `http://0x7f.1:${port()}/`]
    const results = await attemptEach(guarded(''), urls).finally(() => logs.restore())
    expect(results).toEqual(urls.map(() => DESTINATION_NOT_ALLOWED))
    expect(rx.requests).toHaveLength(0)
    // A refusal names neither host nor address, in the event log or in a log line.
    expect(logs.lines.join('\n')).not.toMatch(/127\.0\.0\.1|localhost|::1|2130706433/)
  })

  it('refuses the metadata service and private addresses, with a connector that could not open a socket anyway', async () => {
    const wire = tripwire()
    const d = guarded('', new Agent({ connect: guardedConnector([], { connect: wire.connect }) }))
    const results = await attemptEach(d, ['http://169.254.169.254/latest/meta-data/', 'http://10.0.0.1/', 'https://[fd00::1]/', 'http://[::ffff:a9fe:a9fe]/'])
    expect(results).toEqual(Array(4).fill(DESTINATION_NOT_ALLOWED))
    expect(wire.calls).toEqual([])
  })

  it('refuses a URL whose variables make it another scheme or a blocked host', async () => {
    const wire = tripwire()
    const d = guarded('', new Agent({ connect: guardedConnector([], { connect: wire.connect }) }))
    await setVariables(deps().db, project, { FILE: 'file:///etc', META: 'http://169.254.169.254' }, 'set')
    const results = await attemptEach(d, ['{{FILE}}/passwd', '{{META}}/latest'])
    expect(results).toEqual(['Unsupported URL scheme', DESTINATION_NOT_ALLOWED])
    expect(wire.calls).toEqual([])
  })

  it('delivers to 127.0.0.1 when WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8, and still refuses what it does not name', async () => {
    const results = await attemptEach(guarded('127.0.0.0/8'), [rx.url + '/ok', `http://2130706433:${port()}/decimal`, `http://[::1]:${port()}/`])
    expect(results).toEqual(['succeed', 'succeed', DESTINATION_NOT_ALLOWED])
    expect(rx.requests.map(r => r.path).sort()).toEqual(['/decimal', '/ok'])
    // The Host header still carries what the URL said.
    expect(rx.requests.find(r => r.path === '/decimal')?.headers.host).toBe(`127.0.0.1:${port()}`)
  })
})
