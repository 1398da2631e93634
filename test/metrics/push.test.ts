import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Registry } from 'prom-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PushError, pushRegistry } from '../../lib/metrics/push.js'
import { LOGGED_EXCERPT_BYTES } from '../../lib/text.js'

// A Pushgateway stand-in on 127.0.0.1 that refuses every push with a 5 MB page holding a NUL.
let server: Server
let url: string
beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume()
    res.writeHead(400, { 'content-type': 'text/plain' })
    res.end('bad metric \u0000 ' + 'x'.repeat(5 * 1024 * 1024))
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(async () => {
  await new Promise(resolve => server.close(resolve))
})

describe('a push the Pushgateway refuses', () => {
  it('fails with the status and a bounded, cleaned start of the answer', async () => {
    const error = await pushRegistry(url, new Registry(), { job: 'j' }, { replace: false, timeoutMs: 2_000 }).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(PushError)
    const message = error instanceof Error ? error.message : ''
    expect(message).toMatch(/^Pushgateway answered 400: bad metric /)
    expect(message).not.toContain('\u0000')
    expect(Buffer.byteLength(message)).toBeLessThanOrEqual(LOGGED_EXCERPT_BYTES + 40)
  })
})
