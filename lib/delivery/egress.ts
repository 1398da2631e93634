// The egress guard: tenants write target URLs, so without it a URL (or a public name resolving) to
// loopback, a private range or the cloud metadata address would let them read internal services
// through the stored responses. The guard runs where undici opens sockets, after DNS, and connects
// to the very address it checked, so a second resolution cannot rebind the name elsewhere.
import { lookup as dnsLookup } from 'node:dns'
import { BlockList, isIP, SocketAddress } from 'node:net'
import { buildConnector } from 'undici'

/** The failed attempt's message for a refused destination: it never names the host or the address. */
export const DESTINATION_NOT_ALLOWED = 'Destination not allowed'
/** `code` of the connect error, so the delivery maps it to DESTINATION_NOT_ALLOWED like other network errors. */
export const DESTINATION_NOT_ALLOWED_CODE = 'ERR_DESTINATION_NOT_ALLOWED'

/**
 * Longest wait for a name to resolve. getaddrinfo has no deadline we control, and a slow resolver
 * must not hold a delivery slot; 10 s matches undici's own connect timeout.
 */
const LOOKUP_TIMEOUT_MS = 10_000

/** Thrown (as a connect error) when every address of a destination is refused. */
class DestinationNotAllowedError extends Error {
  override name = 'DestinationNotAllowedError'
  readonly code = DESTINATION_NOT_ALLOWED_CODE
  constructor() {
    super(DESTINATION_NOT_ALLOWED)
  }
}

/** One range of WEBHOOK_ALLOWED_NETWORKS: an address and how many of its leading bits a match shares. */
export type Network = { family: 'ipv4' | 'ipv6'; address: string; prefix: number }

// An address as undici or a URL may spell it: brackets around IPv6, a zone (`fe80::1%eth0`), which
// only picks an interface; the address is what is checked.
function bare(text: string): string {
  const unbracketed = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
  return unbracketed.split('%')[0] ?? ''
}

function familyOf(address: string): Network['family'] | undefined {
  const version = isIP(address)
  return version === 4 ? 'ipv4' : version === 6 ? 'ipv6' : undefined
}

/** Parses `address/bits` (or a bare address, meaning that one address); undefined when it is not a range. */
function parseNetwork(text: string): Network | undefined {
  const [addr = '', bitsText, extra] = text.split('/')
  if (extra !== undefined) return undefined
  const address = bare(addr)
  const family = familyOf(address)
  if (!family) return undefined
  const max = family === 'ipv4' ? 32 : 128
  const prefix = bitsText === undefined ? max : /^\d{1,3}$/.test(bitsText) ? Number(bitsText) : NaN
  if (!(prefix >= 0 && prefix <= max)) return undefined
  return { family, address, prefix }
}

/** Parses a comma- or space-separated CIDR list; `invalid` holds the 1-based positions of entries that are not ranges. */
export function parseNetworks(list: string): { networks: Network[]; invalid: number[] } {
  const networks: Network[] = []
  const invalid: number[] = []
  list
    .split(/[\s,]+/)
    .filter(Boolean)
    .forEach((entry, i) => {
      const n = parseNetwork(entry)
      if (n) networks.push(n)
      else invalid.push(i + 1)
    })
  return { networks, invalid }
}

/** Never a webhook receiver: this host, private networks, the metadata service, and ranges that are not unicast internet. */
const BLOCKED = [
  '0.0.0.0/8', // "this network", 0.0.0.0 reaches the local host
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16', // RFC 1918 private
  '100.64.0.0/10', // carrier-grade NAT, private to the provider
  '127.0.0.0/8', // loopback
  '169.254.0.0/16', // link-local, holds the cloud metadata service 169.254.169.254
  '192.0.0.0/24', // IETF protocol assignments
  '192.0.2.0/24',
  '198.51.100.0/24',
  '203.0.113.0/24', // documentation
  '192.88.99.0/24', // deprecated 6to4 relay anycast
  '198.18.0.0/15', // benchmarking
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, and 255.255.255.255 broadcast
  '::/96', // unspecified ::, loopback ::1 and the deprecated IPv4-compatible block
  '64:ff9b:1::/48', // local-use NAT64
  '100::/64', // discard-only
  '2001::/23', // IETF protocol assignments: Teredo (hides an IPv4 we cannot check), benchmarking, ORCHID
  '2001:db8::/32',
  '3fff::/20', // documentation
  'fc00::/7', // unique-local
  'fe80::/10',
  'fec0::/10', // link-local, deprecated site-local
  'ff00::/8', // multicast
].map(text => {
  const n = parseNetwork(text)
  if (!n) throw new Error(`bad built-in range ${text}`)
  return n
})

/**
 * The IPv6 ranges that carry (and reach) the addresses of an IPv4 range: NAT64 (64:ff9b::/96, the
 * IPv4 in the last 32 bits) and 6to4 (2002::/16, the IPv4 in the 32 after the prefix). IPv4-mapped
 * addresses (::ffff:0:0/96) need none: BlockList already checks them against the IPv4 ranges.
 */
function carriers(n: Network): Network[] {
  if (n.family !== 'ipv4') return []
  const [a = 0, b = 0, c = 0, d = 0] = n.address.split('.').map(Number)
  const hex = (hi: number, lo: number) => ((hi << 8) | lo).toString(16)
  return [
    { family: 'ipv6', address: `64:ff9b::${n.address}`, prefix: 96 + n.prefix },
    { family: 'ipv6', address: `2002:${hex(a, b)}:${hex(c, d)}::`, prefix: 16 + n.prefix },
  ]
}

/** Node's own matcher over the ranges and the IPv6 ranges that carry their IPv4 addresses. */
function blockList(networks: readonly Network[]): BlockList {
  const list = new BlockList()
  for (const n of networks.flatMap(n => [n, ...carriers(n)])) list.addSubnet(n.address, n.prefix, n.family)
  return list
}

const blocked = blockList(BLOCKED)

/**
 * The guard's decision, built once per allowed list: an address is allowed when an allowed range holds
 * it (or the IPv4 address it carries), else when no blocked range does. A range BlockList matches
 * holds an address in every spelling: `::ffff:127.0.0.1` is 127.0.0.1, and a range written as
 * `::ffff:10.0.0.0/104` holds 10.0.0.1. Anything that is not an IP address is refused.
 */
export function egressDecision(allowed: readonly Network[]): (address: string) => boolean {
  const open = allowed.length ? blockList(allowed) : undefined
  return text => {
    const address = bare(text)
    const family = familyOf(address)
    if (!family) return false
    // Parsed once for both lists: BlockList parses a string again on every check.
    const parsed = new SocketAddress({ address, family })
    return open?.check(parsed) === true || !blocked.check(parsed)
  }
}

/** Every address a name resolves to. */
export type Lookup = (hostname: string) => Promise<string[]>

const systemLookup: Lookup = hostname =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => {
      if (err) reject(err)
      else resolve(addresses.map(a => a.address))
    })
  })

/**
 * An undici `connect` that refuses destinations the guard does not allow, before any socket opens.
 * Names are resolved here (IP literals are checked as they are: undici never resolves them), and the
 * socket goes to the first allowed address; the Host header and TLS SNI still carry the name.
 */
export function guardedConnector(
  allowed: readonly Network[],
  opts: { connect?: buildConnector.connector; lookup?: Lookup } = {},
): buildConnector.connector {
  const connect = opts.connect ?? buildConnector({})
  const lookup = opts.lookup ?? systemLookup
  const allows = egressDecision(allowed)
  const pick = async (hostname: string): Promise<string> => {
    const addresses = isIP(hostname) ? [hostname] : await bounded(lookup(hostname))
    const address = addresses.find(allows)
    if (address === undefined) throw new DestinationNotAllowedError()
    return address
  }
  return (options, callback) => {
    void pick(options.hostname).then(
      address => {
        try {
          connect({ ...options, hostname: address }, callback)
        } catch (e) {
          callback(e instanceof Error ? e : new Error('connect failed'), null)
        }
      },
      (e: unknown) => callback(e instanceof Error ? e : new Error('lookup failed'), null),
    )
  }
}

function bounded<T>(p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    // EAI_AGAIN is what a resolver that gives up reports; the delivery maps it to "Host not found".
    timer = setTimeout(() => reject(Object.assign(new Error('DNS lookup timed out'), { code: 'EAI_AGAIN' })), LOOKUP_TIMEOUT_MS)
  })
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer))
}
