/**
 * `npx tsx bench/egress.ts [n]`: the egress guard's decision (lib/delivery/egress.ts),
 * the hand-written CIDR matcher it replaced against Node's net.BlockList, in decisions per second per
 * kind of address. The hand-written one is read from git (HANDWRITTEN_REV), so the comparison can be
 * rerun after its removal. Interleaved: each round times both on every kind, alternating which goes
 * first, so the machine's drift falls on both alike; the table shows the median and the spread.
 */
import './quiet.js'
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { egressDecision, parseNetworks } from '../lib/delivery/egress.js'
import { dec, int, summary, table } from './stats.js'

/** The last commit whose lib/delivery/egress.ts matched CIDRs by hand (BigInt arithmetic). */
const HANDWRITTEN_REV = 'ea7b79ea456a6ec83e74be5b4d0c55b3713577c0'
const n = Number(process.argv[2] ?? 200_000)
const ROUNDS = Number(process.env.EGRESS_ROUNDS ?? 7)

type Decide = (address: string) => boolean

/** Mixed answers on purpose: public addresses (allowed) and blocked ones, as deliveries meet them. */
const KINDS: ReadonlyArray<[string, readonly string[]]> = [
  ['IPv4', ['93.184.216.34', '8.8.8.8', '10.0.0.1', '172.16.5.4', '192.168.1.1', '169.254.169.254', '127.0.0.1', '10.1.2.3']],
  ['IPv6', ['2606:4700:4700::1111', '2a00:1450:4001:82a::200e', 'fd12:3456::1', 'fe80::1', '::1', '2001:db8::1', 'ff02::1', 'fd00::5']],
  [
    'IPv4-mapped IPv6',
    ['::ffff:93.184.216.34', '::ffff:8.8.8.8', '::ffff:127.0.0.1', '::ffff:a9fe:a9fe', '::ffff:10.0.0.1', '::ffff:10.1.2.3'],
  ],
  ['NAT64 / 6to4', ['64:ff9b::808:808', '64:ff9b::a9fe:a9fe', '2002:808:808::1', '2002:a00:1::1']],
]
/** The default (nothing opened) and a deployment that opens a private range of each family. */
const LISTS = ['', '10.1.0.0/16 fd00::/8']

type HandWritten = {
  isAllowedAddress: (address: string, allowed: readonly unknown[]) => boolean
  parseNetworks: (list: string) => { networks: unknown[] }
}

/** Imports the hand-written guard from git, beside the repository's node_modules so its imports resolve. */
async function handWritten(): Promise<HandWritten> {
  const root = fileURLToPath(new URL('..', import.meta.url))
  const source = execFileSync('git', ['show', `${HANDWRITTEN_REV}:lib/delivery/egress.ts`], { cwd: root, encoding: 'utf8' })
  const dir = `${root}.bench-build`
  mkdirSync(dir, { recursive: true })
  writeFileSync(`${dir}/egress-handwritten.ts`, source)
  const mod: Partial<HandWritten> = await import(pathToFileURL(`${dir}/egress-handwritten.ts`).href)
  if (typeof mod.isAllowedAddress !== 'function' || typeof mod.parseNetworks !== 'function')
    throw new Error(`${HANDWRITTEN_REV} has no hand-written guard`)
  return { isAllowedAddress: mod.isAllowedAddress, parseNetworks: mod.parseNetworks }
}

/** Decisions per second over `n` decisions cycling through `addresses`; the allowed count keeps the loop from being optimised away. */
function rate(decide: Decide, addresses: readonly string[]): { perSecond: number; allowed: number } {
  let allowed = 0
  const start = performance.now()
  for (let i = 0; i < n; i++) if (decide(addresses[i % addresses.length] ?? '')) allowed++
  return { perSecond: n / ((performance.now() - start) / 1000), allowed }
}

async function main(): Promise<void> {
  const old = await handWritten()
  const rows: string[][] = []
  for (const list of LISTS) {
    const oldNetworks = old.parseNetworks(list).networks
    const variants: Array<[string, Decide]> = [
      ['hand-written', a => old.isAllowedAddress(a, oldNetworks)],
      ['BlockList', egressDecision(parseNetworks(list).networks)],
    ]
    for (const [kind, addresses] of KINDS) {
      // Both must say the same of every address, or the race means nothing.
      const differ = addresses.filter(a => variants.every(([, d]) => d(a)) !== variants.some(([, d]) => d(a)))
      if (differ.length) throw new Error(`the guards disagree on ${differ.join(', ')}`)
      const rates = new Map<string, number[]>(variants.map(([name]) => [name, []]))
      for (let round = 0; round < ROUNDS + 1; round++) {
        const order = round % 2 ? [...variants].reverse() : variants
        for (const [name, decide] of order) {
          const { perSecond } = rate(decide, addresses)
          // Round 0 warms both up (JIT) and is not counted.
          if (round > 0) rates.get(name)?.push(perSecond)
        }
      }
      const [a, b] = variants.map(([name]) => summary(rates.get(name) ?? []))
      if (!a || !b) continue
      const spread = (s: { min: number; max: number; median: number }) => `${dec(((s.max - s.min) / s.median) * 100, 0)}%`
      rows.push([
        list || '(none)',
        kind,
        int(a.median),
        spread(a),
        dec(1e6 / a.median, 2),
        int(b.median),
        spread(b),
        dec(1e6 / b.median, 2),
        `${dec(a.median / b.median, 2)}x`,
      ])
    }
  }
  console.log(
    `${n.toLocaleString('en-US')} decisions per measurement, ${ROUNDS} interleaved rounds (median; spread = (max - min) / median), Node ${process.version}`,
  )
  console.log(table(['allowed', 'addresses', 'hand-written/s', 'spread', 'µs', 'BlockList/s', 'spread', 'µs', 'hand/BlockList'], rows))
}

await main()
