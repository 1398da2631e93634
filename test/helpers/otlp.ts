import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** One exported span as the tests read it: ids in hex, attributes flattened to plain values. */
export type ExportedSpan = {
  traceId: string
  spanId: string
  parentSpanId: string
  name: string
  kind: number
  attributes: Record<string, unknown>
  links: Array<{ traceId: string; spanId: string }>
  status: { code?: number; message?: string }
  service: string | undefined
}

/** An OTLP/HTTP collector on 127.0.0.1 taking JSON exports (the exporter's encoding): every span it was sent, and every raw body. */
export type OtlpReceiver = {
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it (spans arrive at /v1/traces). */
  url: string
  spans: ExportedSpan[]
  /** Every export request's body as received, for checks that a value appears nowhere. */
  bodies: string[]
  /** Waits until `predicate` holds for the spans received, at most `ms`. */
  waitFor(predicate: (spans: ExportedSpan[]) => boolean, ms?: number): Promise<ExportedSpan[]>
  reset(): void
  close(): Promise<void>
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number }
type KeyValue = { key: string; value: AnyValue }
type JsonSpan = {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  attributes?: KeyValue[]
  links?: Array<{ traceId: string; spanId: string }>
  status?: { code?: number; message?: string }
}
type JsonExport = {
  resourceSpans?: Array<{ resource?: { attributes?: KeyValue[] }; scopeSpans?: Array<{ spans?: JsonSpan[] }> }>
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ExportedSpan[] = []
  const bodies: string[] = []
  const server: Server = createServer((req, res) => {
    void readBody(req).then(body => {
      bodies.push(body)
      if (req.url !== '/v1/traces' || !String(req.headers['content-type']).includes('json')) {
        res.writeHead(415).end()
        return
      }
      spans.push(...spansOf(JSON.parse(body) as JsonExport))
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    bodies,
    waitFor: async (predicate, ms = 5_000) => {
      const until = Date.now() + ms
      while (!predicate(spans)) {
        if (Date.now() > until) throw new Error(`OTLP receiver: condition not met in ${ms} ms; spans: ${spans.map(s => s.name).join(', ')}`)
        await new Promise(r => setTimeout(r, 20))
      }
      return spans
    },
    reset: () => {
      spans.length = 0
      bodies.length = 0
    },
    close: () => new Promise<void>(resolve => server.close(() => resolve())),
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
  })
}

function spansOf(doc: JsonExport): ExportedSpan[] {
  return (doc.resourceSpans ?? []).flatMap(rs => {
    const service = valueOf(rs.resource?.attributes?.find(a => a.key === 'service.name')?.value)
    return (rs.scopeSpans ?? []).flatMap(ss =>
      (ss.spans ?? []).map(s => ({
        traceId: hex(s.traceId),
        spanId: hex(s.spanId),
        parentSpanId: s.parentSpanId ? hex(s.parentSpanId) : '',
        name: s.name,
        kind: s.kind,
        attributes: Object.fromEntries((s.attributes ?? []).map(a => [a.key, valueOf(a.value)])),
        links: (s.links ?? []).map(l => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
        status: s.status ?? {},
        service: typeof service === 'string' ? service : undefined,
      })),
    )
  })
}

// OTLP/JSON writes ids in hex; accept base64 too (the protobuf-JSON mapping's default).
function hex(id: string): string {
  return /^[0-9a-f]+$/i.test(id) ? id.toLowerCase() : Buffer.from(id, 'base64').toString('hex')
}

function valueOf(v: AnyValue | undefined): unknown {
  if (v === undefined) return undefined
  if (v.stringValue !== undefined) return v.stringValue
  if (v.intValue !== undefined) return Number(v.intValue)
  if (v.boolValue !== undefined) return v.boolValue
  return v.doubleValue
}
