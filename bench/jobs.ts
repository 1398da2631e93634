import { randomUUID } from 'node:crypto'
import { Agent, request } from 'undici'

/**
 * The payload the job-queue contenders carry: one event as Actions puts it on the wire (its `meta`
 * plus the content payload), so every contender stores and POSTs about the same bytes.
 */
export function eventJob(i: number) {
  return {
    meta: {
      eventId: randomUUID(),
      transactionId: '7f1b6a8e-3b1c-4a55-9d63-0c3f1d2e4a10',
      identityId: null,
      ipAddress: null,
      userAgent: null,
      createdAt: new Date().toISOString(),
      lastStateChange: new Date().toISOString(),
      numRetries: 0,
      trigger: 'article_created',
      target: 'hook',
    },
    ...articlePayload(i),
  }
}

/** A `create` payload, as a content API fires it; `t` (epoch ms) lets the receiver measure latency. */
export function articlePayload(i: number, t?: number) {
  return {
    operation: 'create' as const,
    entity: 'Article',
    id: i,
    values: t === undefined ? { title: `Article ${i}` } : { title: `Article ${i}`, t },
  }
}

/**
 * POSTs as Actions' delivery does: undici over a keep-alive pool, JSON body `{ events: [...] }`,
 * response body consumed, any non-2xx answer an error (so the job queue retries it).
 */
export function createPoster(url: string) {
  const agent = new Agent({ keepAliveTimeout: 30_000, keepAliveMaxTimeout: 60_000, connections: 64, pipelining: 1 })
  return {
    async post(events: unknown[]): Promise<void> {
      const res = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ events }),
        dispatcher: agent,
        signal: AbortSignal.timeout(30_000),
      })
      await res.body.dump()
      if (res.statusCode < 200 || res.statusCode >= 300) throw new Error(`receiver answered ${res.statusCode}`)
    },
    close: () => agent.close(),
  }
}

export type Poster = ReturnType<typeof createPoster>
