import { randomUUID } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

type DemoEvent = { meta: { eventId: string; numRetries: number }; id: number }

/**
 * A newcomer's minute with the system: a flaky demo receiver, a sample actions schema, sample content
 * events through the enqueue endpoint, then deliveries, retries and the final counters.
 */
export async function runDemo(baseUrl: string, print: (line: string) => void): Promise<void> {
  const receiver = await startDemoReceiver()
  try {
    print(`demo receiver on ${receiver.url}: every 4th request answers 503, every 5th article is refused on its first attempt`)
    await call(baseUrl, 'PUT', '/schema/demo', sampleSchema(receiver.url))
    print('stored the actions schema of project "demo": targets search-index (batches of 5) and mailer (one by one)')
    const tx = randomUUID()
    const events = [
      ...Array.from({ length: 20 }, (_, i) => ({
        trigger: 'article_published',
        payload: { operation: 'create', entity: 'Article', id: i + 1, values: { title: `Article ${i + 1}` } },
      })),
      { trigger: 'article_deleted', payload: { operation: 'delete', entity: 'Article', id: 3 } },
      ...Array.from({ length: 4 }, (_, i) => ({
        trigger: 'author_updated',
        payload: { operation: 'update', entity: 'Author', id: 100 + i, values: { name: `Author ${i}` }, old: { name: 'Old' } },
      })),
    ]
    const { eventIds } = (await call(baseUrl, 'POST', '/enqueue', { project: 'demo', transactionId: tx, events })) as { eventIds: string[] }
    print(`enqueued ${eventIds.length} events (one transaction); dispatch wakes on the SQS signal`)

    const deadline = Date.now() + 60_000
    let last = ''
    for (;;) {
      const states = (await call(baseUrl, 'GET', '/events/demo')) as Record<string, number>
      const line = ['created', 'processing', 'retrying', 'succeed', 'failed'].map(s => `${s} ${states[s] ?? 0}`).join(', ')
      if (line !== last) print(`states     ${line}`)
      last = line
      const open = (states.created ?? 0) + (states.processing ?? 0) + (states.retrying ?? 0)
      if (open === 0) break
      if (Date.now() > deadline) {
        print('still not done after 60 s; the events stay in the database and the sweeper keeps re-driving them')
        break
      }
      await new Promise(r => setTimeout(r, 250))
    }
    const metrics = await (await fetch(baseUrl + '/metrics')).text()
    print('counters of project "demo":')
    for (const name of ['events_enqueued_total', 'events_succeeded_total', 'delivery_attempts_failed_total', 'events_failed_total']) {
      const m = new RegExp(`^contember_actions_${name}\\{contember_project="demo"\\} (\\S+)$`, 'm').exec(metrics)
      print(`  contember_actions_${name} ${m?.[1] ?? 0}`)
    }
    print(`receiver saw ${receiver.requests} requests carrying ${receiver.events} events, ${receiver.retries} of them retries`)
  } finally {
    await receiver.close()
  }
}

function sampleSchema(receiverUrl: string) {
  return {
    targets: {
      'search-index': {
        type: 'webhook',
        name: 'search-index',
        url: `${receiverUrl}/search`,
        batchSize: 5,
        initialRepeatIntervalMs: 1000,
        maxAttempts: 5,
        timeoutMs: 5000,
      },
      mailer: {
        type: 'webhook',
        name: 'mailer',
        url: `${receiverUrl}/mail`,
        headers: { 'X-Demo': 'yes' },
        initialRepeatIntervalMs: 1000,
        maxAttempts: 5,
        timeoutMs: 5000,
      },
    },
    triggers: {
      article_published: {
        type: 'basic',
        name: 'article_published',
        target: 'search-index',
        entity: 'Article',
        create: true,
        delete: false,
        update: false,
      },
      article_deleted: {
        type: 'basic',
        name: 'article_deleted',
        target: 'search-index',
        entity: 'Article',
        create: false,
        delete: true,
        update: false,
        priority: 5,
      },
      author_updated: { type: 'watch', name: 'author_updated', target: 'mailer', entity: 'Author', watch: ['name'] },
    },
  }
}

async function startDemoReceiver() {
  const stats = { requests: 0, events: 0, retries: 0 }
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', c => {
      body += c
    })
    req.on('end', () => {
      const n = ++stats.requests
      const events: DemoEvent[] = JSON.parse(body).events ?? []
      stats.events += events.length
      stats.retries += events.filter(e => e.meta.numRetries > 0).length
      if (n % 4 === 0) {
        res.writeHead(503).end('busy, try later')
        return
      }
      const failures = events
        .filter(e => e.id % 5 === 0 && e.meta.numRetries === 0)
        .map(e => ({ eventId: e.meta.eventId, error: 'index not ready' }))
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ failures }))
    })
  })
  await new Promise<void>(r => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get requests() {
      return stats.requests
    },
    get events() {
      return stats.events
    },
    get retries() {
      return stats.retries
    },
    close: () =>
      new Promise<void>(r => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}

async function call(base: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(base + path, {
    method,
    ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  })
  const json: unknown = await res.json()
  if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${JSON.stringify(json)}`)
  return json
}
