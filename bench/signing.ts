// What Standard Webhooks signing costs per event: part of `npm run bench` (scenario key `signing`),
// or alone with `npx tsx bench/signing.ts`. Measures the whole
// per-request work the delivery adds (webhook-id, timestamp, one HMAC-SHA256 over the body per
// secret, the headers), for one-event requests of 1 KB and 40 KB bodies, with one and two secrets.
import { generateSecret, signingKeys, withSignature, type SigningKeys } from '../lib/delivery/signing.js'
import { dec, summary, table } from './stats.js'

const BODY_SIZES = [
  { label: '1 KB', bytes: 1024 },
  { label: '40 KB', bytes: 40 * 1024 },
]
const SECRET_COUNTS = [1, 2]
/** Rounds per case; the median of their per-event times is reported, min and max show the spread. */
const ROUNDS = 7
/** Signatures per round: enough that a round lasts well above the timer's resolution. */
const PER_ROUND = 5_000

function body(bytes: number): string {
  // A JSON body as the delivery sends it, padded to the size.
  const head = '{"events":[{"meta":{"eventId":"5b3c0f1e-0000-4000-8000-000000000001"},"values":{"text":"'
  const tail = '"}}]}'
  return head + 'x'.repeat(Math.max(0, bytes - head.length - tail.length)) + tail
}

function keys(count: number): SigningKeys {
  const r = signingKeys('{{K}}', new Map([['K', Array.from({ length: count }, () => generateSecret()).join(' ')]]))
  if (!r.ok || !r.keys) throw new Error('could not build signing keys')
  return r.keys
}

const ids = ['5b3c0f1e-0000-4000-8000-000000000001']
const headers = { 'content-type': 'application/json', 'user-agent': 'Contember Actions' }
let sink = 0

function roundMicros(k: SigningKeys | undefined, text: string): number {
  const started = process.hrtime.bigint()
  for (let i = 0; i < PER_ROUND; i++) sink += withSignature(headers, k, ids, text)['webhook-signature']?.length ?? 0
  return Number(process.hrtime.bigint() - started) / 1000 / PER_ROUND
}

/** The signing table: per-event cost for each body size and secret count, and the unsigned baseline. */
export function signingTable(): string {
  const rows: string[][] = []
  for (const size of BODY_SIZES) {
    const text = body(size.bytes)
    for (const count of SECRET_COUNTS) {
      const k = keys(count)
      roundMicros(k, text) // warm-up: JIT and the HMAC bindings
      const s = summary(Array.from({ length: ROUNDS }, () => roundMicros(k, text)))
      rows.push([size.label, String(count), dec(s.median), dec(s.min), dec(s.max)])
    }
  }
  const baseline = summary(Array.from({ length: ROUNDS }, () => roundMicros(undefined, body(1024))))
  return (
    `Standard Webhooks signing cost per one-event request (${ROUNDS} rounds of ${PER_ROUND.toLocaleString('en')}, Node ${process.version})\n\n` +
    table(['body', 'secrets', 'µs/event median', 'min', 'max'], rows) +
    '\n' +
    `\nthe same request headers without signing: ${dec(baseline.median)} µs/event${sink < 0 ? ' ' : ''}\n`
  )
}

// Run on its own (`npx tsx bench/signing.ts`). Not `import.meta.url === argv[1]`: in the bench's bundle
// (bench/build.ts) every module shares the entry point's URL, and the table would print at every start.
if (/[\\/]signing\.ts$/.test(process.argv[1] ?? '')) process.stdout.write(signingTable())
