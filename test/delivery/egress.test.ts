import { Agent, buildConnector } from 'undici'
import { afterAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../lib/config.js'
import { ConfigError } from '../../lib/errors.js'
import { setVariables } from '../../lib/db/variables.js'
import {
  DESTINATION_NOT_ALLOWED,
  DESTINATION_NOT_ALLOWED_CODE,
  egressDecision,
  guardedConnector,
  parseNetworks,
  type Network,
} from '../../lib/delivery/egress.js'
import { closeDeps, createDeps, type Deps } from '../../lib/deps.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'

const none: Network[] = []
const nets = (list: string) => parseNetworks(list).networks
const isAllowedAddress = (address: string, allowed: readonly Network[]) => egressDecision(allowed)(address)
/** The connect error of a refused destination: our words and code, never the host or the address. */
const refused = { name: 'DestinationNotAllowedError', code: DESTINATION_NOT_ALLOWED_CODE, message: DESTINATION_NOT_ALLOWED }

describe('the guard decision', () => {
  it.each([
    '127.0.0.1',
    '127.8.9.10',
    '::1',
    '[::1]',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '169.254.169.254',
    '10.0.0.1',
    '172.16.5.4',
    '172.31.255.255',
    '192.168.1.1',
    '100.64.0.1',
    '100.127.255.254',
    '0.0.0.0',
    '::',
    '224.0.0.1',
    '239.255.255.250',
    '255.255.255.255',
    '240.0.0.1',
    '192.0.2.1',
    '198.51.100.7',
    '203.0.113.9',
    '198.18.0.1',
    '198.19.255.1',
    '192.0.0.8',
    '2001:db8::1',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'fe80::1%eth0',
    'ff02::1',
    '::ffff:10.0.0.1',
    '::ffff:169.254.169.254',
    '64:ff9b::a9fe:a9fe',
    '64:ff9b::127.0.0.1',
    '2002:7f00:1::1',
    '2002:a00:1::1',
    '2002:a9fe:a9fe::',
    '2001::1',
    '64:ff9b:1::1',
    'not-an-address',
    '',
  ])('refuses %s', address => {
    expect(isAllowedAddress(address, none)).toBe(false)
  })

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ])('allows the public address %s', address => {
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
    const err = (() => {
      try {
        loadConfig({ DATABASE_URL: 'postgres://x/y', SIGNAL_QUEUE_URL: 'http://q/1', WEBHOOK_ALLOWED_NETWORKS: '10.0.0.0/8 secret-ish' })
      } catch (e) {
        return e
      }
    })()
    expect(err).toBeInstanceOf(ConfigError)
    expect(String(err)).toMatch(/WEBHOOK_ALLOWED_NETWORKS: expected CIDR ranges.*entry 2/)
    expect(String(err)).not.toContain('secret-ish')
  })
})

// The ranges are matched by Node's net.BlockList: its edges, and its way with IPv4 inside IPv6.
describe('the guard decision at the edges of each range', () => {
  it.each([
    ['10.0.0.0/8', '9.255.255.255', '10.0.0.0', '10.255.255.255', '11.0.0.0'],
    ['172.16.0.0/12', '172.15.255.255', '172.16.0.0', '172.31.255.255', '172.32.0.0'],
    ['192.168.0.0/16', '192.167.255.255', '192.168.0.0', '192.168.255.255', '192.169.0.0'],
    ['100.64.0.0/10', '100.63.255.255', '100.64.0.0', '100.127.255.255', '100.128.0.0'],
    ['127.0.0.0/8', '126.255.255.255', '127.0.0.0', '127.255.255.255', '128.0.0.0'],
    ['169.254.0.0/16', '169.253.255.255', '169.254.0.0', '169.254.255.255', '169.255.0.0'],
    ['198.18.0.0/15', '198.17.255.255', '198.18.0.0', '198.19.255.255', '198.20.0.0'],
    ['224.0.0.0/4', '223.255.255.255', '224.0.0.0', '239.255.255.255', '240.0.0.0'],
    ['fc00::/7', 'fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'fc00::', 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'fe00::'],
    ['fe80::/10', 'fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'fe80::', 'febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ff00::'],
    ['::/96', undefined, '::', '::ffff:ffff', '::1:0:0'],
  ])('%s: refuses its first and last address, allows the neighbours outside', (_, before, first, last, after) => {
    expect([first, last].map(a => isAllowedAddress(a, none))).toEqual([false, false])
    // 240.0.0.0 starts the reserved block and ff00:: multicast: the neighbour is refused by a range of its own.
    const outside = [before, after].filter((a): a is string => a !== undefined && !['240.0.0.0', 'ff00::'].includes(a))
    expect(outside.map(a => isAllowedAddress(a, none))).toEqual(outside.map(() => true))
  })

  it('judges an IPv4-mapped IPv6 address as its IPv4 address, in dotted and hex spelling, at the range edges', () => {
    expect(
      ['::ffff:10.0.0.0', '::ffff:a00:0', '::ffff:10.255.255.255', '::ffff:aff:ffff', '[::ffff:172.31.255.255]'].some(a =>
        isAllowedAddress(a, none),
      ),
    ).toBe(false)
    expect(
      ['::ffff:9.255.255.255', '::ffff:9ff:ffff', '::ffff:11.0.0.0', '::ffff:b00:0', '::ffff:172.32.0.0'].every(a =>
        isAllowedAddress(a, none),
      ),
    ).toBe(true)
  })

  it('judges NAT64 and 6to4 addresses by the IPv4 address they carry, at the range edges', () => {
    expect(
      ['64:ff9b::a00:0', '64:ff9b::aff:ffff', '2002:a00::', '2002:aff:ffff:ffff::', '64:ff9b::ffff:ffff', '2002:ffff:ffff::'].some(a =>
        isAllowedAddress(a, none),
      ),
    ).toBe(false)
    expect(['64:ff9b::9ff:ffff', '64:ff9b::b00:0', '2002:9ff:ffff::1', '2002:b00::1'].every(a => isAllowedAddress(a, none))).toBe(true)
  })

  it('opens an allowed range in every spelling of its addresses, to its edges and no further', () => {
    const office = nets('10.1.0.0/16')
    const inside = ['10.1.0.0', '10.1.255.255', '::ffff:10.1.255.255', '::ffff:a01:0', '64:ff9b::a01:ffff', '2002:a01:ffff::1']
    const outside = ['10.0.255.255', '10.2.0.0', '::ffff:10.2.0.0', '64:ff9b::a02:0', '2002:a00:ffff::1']
    expect(inside.map(a => isAllowedAddress(a, office))).toEqual(inside.map(() => true))
    expect(outside.map(a => isAllowedAddress(a, office))).toEqual(outside.map(() => false))
  })

  it('reads a range with host bits set as its network, a bracketed or zoned address as the address, and a mapped range as its IPv4 range', () => {
    expect(['10.1.0.0', '10.1.255.255'].every(a => isAllowedAddress(a, nets('10.1.2.3/16')))).toBe(true)
    expect(isAllowedAddress('fd00::5', nets('[fd00::]/8'))).toBe(true)
    expect(isAllowedAddress('fe80::1%eth0', nets('fe80::%eth0/10'))).toBe(true)
    // BlockList matches IPv4 against IPv4-mapped ranges: ::ffff:10.0.0.0/104 and 10.0.0.0/8 name the same addresses.
    const mapped = nets('::ffff:10.0.0.0/104')
    expect(['10.0.0.1', '::ffff:10.255.255.255'].every(a => isAllowedAddress(a, mapped))).toBe(true)
    expect(['11.0.0.0', '192.168.0.1'].map(a => isAllowedAddress(a, mapped))).toEqual([true, false])
    // A bare address is that one address.
    expect(['10.9.9.9', '10.9.9.10'].map(a => isAllowedAddress(a, nets('10.9.9.9')))).toEqual([true, false])
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
  return new Promise(resolve =>
    connector({ hostname, host: `${hostname}:443`, protocol: 'https:', port: '443' }, (...args) => resolve(args[0])),
  )
}

describe('the connector', () => {
  it('refuses a blocked IP literal before any socket is opened', async () => {
    const wire = tripwire()
    const lookups: string[] = []
    const connector = guardedConnector(none, {
      connect: wire.connect,
      lookup: async h => {
        lookups.push(h)
        return []
      },
    })
    for (const literal of ['169.254.169.254', '10.0.0.1', '127.0.0.1', '::1', '::ffff:7f00:1']) {
      const err = await connectVia(connector, literal)
      expect(err).toMatchObject(refused)
    }
    expect(wire.calls).toEqual([])
    // Literals are checked as they are: nothing to resolve.
    expect(lookups).toEqual([])
  })

  it('refuses a name whose every address is blocked, and pins a mixed answer to its allowed address with the name kept for SNI', async () => {
    const wire = tripwire()
    const answers: Record<string, string[]> = { 'metadata.example': ['169.254.169.254'], 'mixed.example': ['10.0.0.5', '93.184.216.34'] }
    const connector = guardedConnector(none, { connect: wire.connect, lookup: async h => answers[h] ?? [] })
    expect(await connectVia(connector, 'metadata.example')).toMatchObject(refused)
    expect(wire.calls).toEqual([])
    expect(await connectVia(connector, 'mixed.example')).toHaveProperty('message', 'tripwire: no socket in this test')
    expect(wire.calls).toEqual([expect.objectContaining({ hostname: '93.184.216.34', host: 'mixed.example:443' })])
  })

  it('resolves localhost through the system resolver and refuses it', async () => {
    const wire = tripwire()
    expect(await connectVia(guardedConnector(none, { connect: wire.connect }), 'localhost')).toMatchObject(refused)
    expect(wire.calls).toEqual([])
  })
})

describe('deliveries through the guard', () => {
  const env = useHarness({ config: { LEASE_MARGIN_MS: '1000' }, receiver: true, project: 'g' })
  const opened: Deps[] = []
  afterAll(async () => {
    for (const d of opened) await d.http.close()
  })
  /** The runtime's deps with the dispatcher a cold start builds from this WEBHOOK_ALLOWED_NETWORKS. */
  const guarded = (allowed: string, http?: Agent): Deps => {
    const d = {
      ...createDeps(
        { ...env.deps.config, WEBHOOK_ALLOWED_NETWORKS: allowed },
        { db: env.deps.db, signals: env.deps.signals, metrics: env.deps.metrics, log: env.deps.log },
      ),
      ...(http ? { http } : {}),
    }
    opened.push(d)
    return d
  }
  const port = () => new URL(env.rx.url).port

  async function attemptEach(d: Deps, urls: string[]): Promise<Array<string | undefined>> {
    await schemaFor(env.deps, env.project, Object.fromEntries(urls.map((url, i) => [`t${i}`, { url, maxAttempts: 3 }])))
    const ids: string[] = []
    for (let i = 0; i < urls.length; i++) ids.push(...(await enqueueMany(env.deps, env.project, `to_t${i}`, 1)))
    await drainProject(d, env.project, FOREVER)
    const rows = await states(env.deps, env.project)
    return ids.map(id => {
      const row = rows.get(id)
      const entry = row?.log[0] as { errorMessage?: string } | undefined
      return row?.state === 'retrying' ? entry?.errorMessage : row?.state
    })
  }

  it('refuses loopback in every spelling with "Destination not allowed" when nothing is allowed, and nothing reaches the receiver', async () => {
    const logs = env.captureLogs()
    const urls = [
      env.rx.url,
      `http://[::1]:${port()}/`,
      `http://[::ffff:127.0.0.1]:${port()}/`,
      `http://localhost:${port()}/`,
      `http://2130706433:${port()}/`,
      `http://0x7f.1:${port()}/`,
    ]
    const results = await attemptEach(guarded(''), urls).finally(() => logs.restore())
    expect(results).toEqual(urls.map(() => DESTINATION_NOT_ALLOWED))
    expect(env.rx.requests).toHaveLength(0)
    // A refusal names neither host nor address, in the event log or in a log line.
    expect(logs.lines.join('\n')).not.toMatch(/127\.0\.0\.1|localhost|::1|2130706433/)
  })

  it('refuses the metadata service and private addresses, with a connector that could not open a socket anyway', async () => {
    const wire = tripwire()
    const d = guarded('', new Agent({ connect: guardedConnector([], { connect: wire.connect }) }))
    const results = await attemptEach(d, [
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.1/',
      'https://[fd00::1]/',
      'http://[::ffff:a9fe:a9fe]/',
    ])
    expect(results).toEqual(Array(4).fill(DESTINATION_NOT_ALLOWED))
    expect(wire.calls).toEqual([])
  })

  it('refuses a URL whose variables make it another scheme or a blocked host', async () => {
    const wire = tripwire()
    const d = guarded('', new Agent({ connect: guardedConnector([], { connect: wire.connect }) }))
    await setVariables(env.deps.db, env.project, { FILE: 'file:///etc', META: 'http://169.254.169.254' }, 'set')
    const results = await attemptEach(d, ['{{FILE}}/passwd', '{{META}}/latest'])
    expect(results).toEqual(['Unsupported URL scheme', DESTINATION_NOT_ALLOWED])
    expect(wire.calls).toEqual([])
  })

  it('delivers to 127.0.0.1 when WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8, and still refuses what it does not name', async () => {
    const results = await attemptEach(guarded('127.0.0.0/8'), [
      env.rx.url + '/ok',
      `http://2130706433:${port()}/decimal`,
      `http://[::1]:${port()}/`,
    ])
    expect(results).toEqual(['succeed', 'succeed', DESTINATION_NOT_ALLOWED])
    expect(env.rx.requests.map(r => r.path).sort()).toEqual(['/decimal', '/ok'])
    // The Host header still carries what the URL said.
    expect(env.rx.requests.find(r => r.path === '/decimal')?.headers.host).toBe(`127.0.0.1:${port()}`)
  })
})
