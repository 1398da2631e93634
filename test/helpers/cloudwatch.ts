import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { gunzipSync } from 'node:zlib'
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch'

/*
 * A local stand-in for CloudWatch, for the real SDK client. @aws-sdk/client-cloudwatch 3.1164.0
 * speaks AWS JSON 1.0 (awsQueryCompatible) for PutMetricData: POST / with
 * `Content-Type: application/x-amz-json-1.0`, `X-Amz-Target: GraniteServiceVersion20100801.PutMetricData`,
 * a JSON body (timestamps as epoch seconds; gzip with `Content-Encoding: gzip` from 10 KiB on, the
 * service's request-compression trait) and an empty JSON object as the success answer. Anything
 * else is answered 400 and recorded, so an SDK upgrade that changes the protocol fails tests loudly.
 */

const TARGET = 'GraniteServiceVersion20100801.PutMetricData'
const JSON_1_0 = 'application/x-amz-json-1.0'

export type WireDimension = { Name: string; Value: string }
export type WireDatum = {
  MetricName: string
  Dimensions?: WireDimension[]
  Value?: number
  Unit?: string
  Timestamp?: number
  StatisticValues?: { SampleCount: number; Sum: number; Minimum: number; Maximum: number }
}
export type PutRequest = { Namespace: string; MetricData: WireDatum[] }
export type Answer = 'ok' | 'fail' | 'hang'

export type FakeCloudWatch = {
  url: string
  /** Every PutMetricData the SDK sent, decoded, answered successfully or not. */
  requests: PutRequest[]
  /** `Content-Encoding` of each decoded request ('identity' when absent). */
  encodings: string[]
  /** Datums of requests answered with success only. */
  accepted(): WireDatum[]
  protocolErrors: string[]
  /** Decides the answer to the n-th request (1-based). */
  answer: (n: number) => Answer
  stop(): Promise<void>
}

export async function startFakeCloudWatch(port = 0): Promise<FakeCloudWatch> {
  const requests: PutRequest[] = []
  const acceptedRequests: PutRequest[] = []
  const protocolErrors: string[] = []
  const encodings: string[] = []
  const fake: FakeCloudWatch = {
    url: '',
    requests,
    encodings,
    accepted: () => acceptedRequests.flatMap(r => r.MetricData),
    protocolErrors,
    answer: () => 'ok',
    stop: () => new Promise(resolve => {
      // Hung requests would keep close() waiting forever.
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
  const server: Server = createServer((req, res) => {
    readBody(req).then(body => {
      const problem = protocolProblem(req, body)
      if (problem) {
        protocolErrors.push(problem)
        return sendJson(res, 400, { __type: 'UnknownOperationException', message: problem })
      }
      const put = parsePut(body)
      requests.push(put)
      encodings.push(req.headers['content-encoding'] ?? 'identity')
      const answer = fake.answer(requests.length)
      if (answer === 'hang') return
      if (answer === 'fail') {
        // awsQueryCompatible services also name the error in this header; the SDK reads either.
        res.setHeader('x-amzn-query-error', 'InternalServiceFault;Receiver')
        return sendJson(res, 500, { __type: 'com.amazonaws.cloudwatch#InternalServiceFault', message: 'injected failure' })
      }
      acceptedRequests.push(put)
      sendJson(res, 200, {})
    }, (error: unknown) => {
      protocolErrors.push(`unreadable body: ${String(error)}`)
      sendJson(res, 400, { __type: 'SerializationException' })
    })
  })
  await new Promise<void>(resolve => server.listen(port, '127.0.0.1', resolve))
  const addr = server.address()
  fake.url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : port}`
  return fake
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = []
    req.on('data', (c: Buffer) => parts.push(c))
    req.on('end', () => {
      const raw = Buffer.concat(parts)
      try {
        resolve((req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8'))
      } catch (error) {
        reject(error)
      }
    })
    req.on('error', reject)
  })
}

function protocolProblem(req: IncomingMessage, body: string): string | undefined {
  if (req.method !== 'POST' || req.url !== '/') return `unexpected ${req.method} ${req.url}`
  if (req.headers['content-type'] !== JSON_1_0) return `unexpected content-type ${req.headers['content-type']}`
  if (req.headers['x-amz-target'] !== TARGET) return `unexpected target ${req.headers['x-amz-target']}`
  if (!req.headers.authorization?.startsWith('AWS4-HMAC-SHA256 ')) return 'request not signed with SigV4'
  try {
    parsePut(body)
  } catch (error) {
    return `undecodable body: ${String(error)}`
  }
  return undefined
}

function parsePut(body: string): PutRequest {
  const parsed: unknown = JSON.parse(body)
  if (typeof parsed !== 'object' || parsed === null || !('Namespace' in parsed) || !('MetricData' in parsed)) throw new Error('not a PutMetricData body')
  const { Namespace, MetricData } = parsed
  if (typeof Namespace !== 'string' || !Array.isArray(MetricData)) throw new Error('not a PutMetricData body')
  return { Namespace, MetricData }
}

function sendJson(res: ServerResponse, status: number, body: object): void {
  res.writeHead(status, { 'content-type': JSON_1_0 })
  res.end(JSON.stringify(body))
}

/** A datum reduced to what the assertions compare; dimensions as `Name=Value` in sent order. */
export function brief(d: WireDatum) {
  return { name: d.MetricName, dims: (d.Dimensions ?? []).map(x => `${x.Name}=${x.Value}`).join(','), unit: d.Unit, value: d.Value }
}

export function briefs(data: WireDatum[]) {
  return data.map(brief).sort((a, b) => `${a.name}|${a.dims}`.localeCompare(`${b.name}|${b.dims}`))
}

export function client(url: string): CloudWatchClient {
  return new CloudWatchClient({ endpoint: url, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } })
}
