// The egress guard: tenants write target URLs, so without it a URL (or a public name resolving) to
// loopback, a private range or the cloud metadata address would let them read internal services
// through the stored responses. The guard runs where undici opens sockets, after DNS, and connects
// to the very address it checked, so a second resolution cannot rebind the name elsewhere.
import { lookup as dnsLookup } from 'node:dns'
import { isIP } from 'node:net'
import { buildConnector } from 'undici'

/** The failed attempt's message for a refused destination: it never names the host or the address. */
export const DESTINATION_NOT_ALLOWED = 'Destination not allowed'
/** `code` of the connect error, so the delivery maps it to DESTINATION_NOT_ALLOWED like other network errors. */
export const DESTINATION_NOT_ALLOWED_CODE = 'ERR_DESTINATION_NOT_ALLOWED'

/**
 * Longest wait for a name to resolve. getaddrinfo has no deadline we control, and a slow resolver
 * must not hold a delivery slot; 10 s matches undici's own connect timeout.
 */
export const LOOKUP_TIMEOUT_MS = 10_000

/** Thrown (as a connect error) when every address of a destination is refused. */
export class DestinationNotAllowedError extends Error {
  override name = 'DestinationNotAllowedError'
  readonly code = DESTINATION_NOT_ALLOWED_CODE
  constructor() {
    super(DESTINATION_NOT_ALLOWED)
  }
}

type Ip = { family: 4 | 6; value: bigint }
/** A CIDR range; addresses match when their top `bits` bits equal the base's. */
export type Network = { family: 4 | 6; base: bigint; bits: number }

const V4_BITS = 32
const V6_BITS = 128

/** Parses an IPv4 or IPv6 address (dotted, compressed, with an embedded IPv4 tail or a zone); undefined when it is none. */
export function parseIp(text: string): Ip | undefined {
  const address = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
  const family = isIP(address)
  if (family === 4) return { family: 4, value: v4Value(address) }
  if (family !== 6) return undefined
  // A zone (`fe80::1%eth0`) only picks an interface; the address is what is checked.
  let rest = address.split('%')[0] ?? ''
  const groups: number[] = []
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(rest)
  if (tail?.[1]) {
    const v4 = v4Value(tail[1])
    rest = rest.slice(0, -tail[1].length) + `${Number(v4 >> 16n).toString(16)}:${Number(v4 & 0xffffn).toString(16)}`
  }
  const [head = '', after] = rest.split('::')
  const part = (s: string) => (s ? s.split(':').map(g => parseInt(g, 16)) : [])
  const left = part(head)
  const right = after === undefined ? [] : part(after)
  groups.push(...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right)
  return { family: 6, value: groups.reduce((acc, g) => (acc << 16n) | BigInt(g), 0n) }
}

function v4Value(address: string): bigint {
  return address.split('.').reduce((acc, o) => (acc << 8n) | BigInt(Number(o)), 0n)
}

/** Parses `address/bits` (or a bare address, meaning that one address); undefined when it is not a range. */
export function parseNetwork(text: string): Network | undefined {
  const [addr = '', bitsText, extra] = text.split('/')
  if (extra !== undefined) return undefined
  const ip = parseIp(addr)
  if (!ip) return undefined
  const max = ip.family === 4 ? V4_BITS : V6_BITS
  const bits = bitsText === undefined ? max : /^\d{1,3}$/.test(bitsText) ? Number(bitsText) : NaN
  if (!(bits >= 0 && bits <= max)) return undefined
  return { family: ip.family, base: ip.value >> BigInt(max - bits), bits }
}

/** Parses a comma- or space-separated CIDR list; `invalid` holds the 1-based positions of entries that are not ranges. */
export function parseNetworks(list: string): { networks: Network[]; invalid: number[] } {
  const networks: Network[] = []
  const invalid: number[] = []
  list.split(/[\s,]+/).filter(Boolean).forEach((entry, i) => {
    const n = parseNetwork(entry)
    if (n) networks.push(n)
    else invalid.push(i + 1)
  })
  return { networks, invalid }
}

function contains(n: Network, ip: Ip): boolean {
  if (n.family !== ip.family) return false
  return ip.value >> BigInt((ip.family === 4 ? V4_BITS : V6_BITS) - n.bits) === n.base
}

function range(text: string): Network {
  const n = parseNetwork(text)
  if (!n) throw new Error(`bad built-in range ${text}`)
  return n
}

/** Never a webhook receiver: this host, private networks, the metadata service, and ranges that are not unicast internet. */
const BLOCKED: readonly Network[] = [
  '0.0.0.0/8', // "this network", 0.0.0.0 reaches the local host
  '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', // RFC 1918 private
  '100.64.0.0/10', // carrier-grade NAT, private to the provider
  '127.0.0.0/8', // loopback
  '169.254.0.0/16', // link-local, holds the cloud metadata service 169.254.169.254
  '192.0.0.0/24', // IETF protocol assignments
  '192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24', // documentation
  '192.88.99.0/24', // deprecated 6to4 relay anycast
  '198.18.0.0/15', // benchmarking
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, and 255.255.255.255 broadcast
  '::/96', // unspecified ::, loopback ::1 and the deprecated IPv4-compatible block
  '64:ff9b:1::/48', // local-use NAT64
  '100::/64', // discard-only
  '2001::/23', // IETF protocol assignments: Teredo (hides an IPv4 we cannot check), benchmarking, ORCHID
  '2001:db8::/32', '3fff::/20', // documentation
  'fc00::/7', // unique-local
  'fe80::/10', 'fec0::/10', // link-local, deprecated site-local
  'ff00::/8', // multicast
].map(range)

const MAPPED = range('::ffff:0:0/96')
const NAT64 = range('64:ff9b::/96')
const SIX_TO_FOUR = range('2002::/16')

/** The IPv4 address an IPv6 address carries and reaches (mapped, NAT64, 6to4), if any. */
function embeddedV4(ip: Ip): Ip | undefined {
  if (ip.family !== 6) return undefined
  if (contains(MAPPED, ip) || contains(NAT64, ip)) return { family: 4, value: ip.value & 0xffffffffn }
  if (contains(SIX_TO_FOUR, ip)) return { family: 4, value: (ip.value >> 80n) & 0xffffffffn }
  return undefined
}

/** The guard's decision for one address: allowed when in `allowed`, else when neither it nor an IPv4 it embeds is blocked. */
export function isAllowedAddress(address: string, allowed: readonly Network[]): boolean {
  const ip = parseIp(address)
  return ip !== undefined && allowedIp(ip, allowed)
}

function allowedIp(ip: Ip, allowed: readonly Network[]): boolean {
  if (allowed.some(n => contains(n, ip))) return true
  const v4 = embeddedV4(ip)
  if (v4 && !allowedIp(v4, allowed)) return false
  // A mapped address is its IPv4 address: its verdict is the IPv4 one.
  if (v4 && contains(MAPPED, ip)) return true
  return !BLOCKED.some(n => contains(n, ip))
}

/** Every address a name resolves to. */
export type Lookup = (hostname: string) => Promise<string[]>

const systemLookup: Lookup = hostname => new Promise((resolve, reject) => {
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
export function guardedConnector(allowed: readonly Network[], opts: { connect?: buildConnector.connector; lookup?: Lookup } = {}): buildConnector.connector {
  const connect = opts.connect ?? buildConnector({})
  const lookup = opts.lookup ?? systemLookup
  const pick = async (hostname: string): Promise<string> => {
    const addresses = isIP(hostname) ? [hostname] : await bounded(lookup(hostname))
    const address = addresses.find(a => isAllowedAddress(a, allowed))
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
