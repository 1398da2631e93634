import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Registry } from 'prom-client'
import type { Relay } from './relay.js'

/** How long a health or metrics request may take to arrive: a client that stalls is cut off. */
const REQUEST_TIMEOUT_MS = 5_000

/**
 * The relay's health endpoint: `GET /health` answers 200 while every project's last pass succeeded,
 * else 503, with each project's state (names, counts and times; never a URL); `GET /metrics` the
 * relay's Prometheus metrics.
 */
export async function serveRelayHealth(
  relay: Relay,
  registry: Registry,
  port: number,
  host = '127.0.0.1',
): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0]
    if (req.method === 'GET' && path === '/health') {
      const healthy = relay.healthy()
      res.writeHead(healthy ? 200 : 503, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ status: healthy ? 'ok' : 'failing', projects: relay.health() }))
      return
    }
    if (req.method === 'GET' && path === '/metrics') {
      void registry.metrics().then(
        text => {
          res.writeHead(200, { 'content-type': registry.contentType })
          res.end(text)
        },
        () => {
          res.writeHead(500)
          res.end()
        },
      )
      return
    }
    res.writeHead(404, { 'content-type': 'application/json' })
    res.end('{"error":"not found: GET /health or /metrics"}')
  })
  server.requestTimeout = REQUEST_TIMEOUT_MS
  server.headersTimeout = REQUEST_TIMEOUT_MS
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })
  const address = server.address() as AddressInfo
  return {
    url: `http://${host}:${address.port}`,
    close: () =>
      new Promise(resolve => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
