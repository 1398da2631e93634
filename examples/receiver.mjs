// A webhook receiver for the quick start: prints each delivery and answers 200 with an empty body
// (every event of the batch delivered). Listens on 127.0.0.1 only. `node examples/receiver.mjs [port]`.
import { createServer } from 'node:http'

const port = Number(process.argv[2] ?? 4000)
// A receiver should bound what it reads; 1 MiB is plenty for the quick start's batches.
const MAX_BODY_BYTES = 1024 * 1024

createServer((req, res) => {
  const chunks = []
  let size = 0
  req.on('data', chunk => {
    size += chunk.length
    if (size > MAX_BODY_BYTES) req.destroy()
    else chunks.push(chunk)
  })
  req.on('end', () => {
    let events = []
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      // The events sit at the target's payloadPath: `payload` for search-index, the root for mailer.
      events = body.events ?? body.payload?.events ?? []
    } catch {
      // Not JSON: still answered 200, printed as zero events.
    }
    const summary = events.map(e => `${e.meta?.trigger} ${e.entity}#${e.id} (attempt ${(e.meta?.numRetries ?? 0) + 1})`).join(', ')
    console.log(`${req.method} ${req.url}: ${events.length} event(s): ${summary}`)
    res.writeHead(200).end()
  })
}).listen(port, '127.0.0.1', () => console.log(`receiver listening on http://127.0.0.1:${port}`))
