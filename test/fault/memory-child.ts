// A dispatcher in its own heap-limited process (the test starts it with --max-old-space-size): it
// drains one project until nothing is due, and exits 0 only if no drain threw.
import { loadConfig } from '../../lib/config.js'
import { closeDeps, createDeps } from '../../lib/deps.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { sqsClient } from '../helpers/sqs.js'

const project = process.env.PROJECT ?? ''
const deps = createDeps(loadConfig(process.env), { sqs: sqsClient(process.env.SQS_ENDPOINT ?? '') })
let succeeded = 0
// Bounded: a drain that stops idle is done; one that stops for time (never, here) gets a few more.
for (let i = 0; i < 5; i++) {
  const res = await drainProject(deps, project, { remainingMs: () => Number.POSITIVE_INFINITY })
  succeeded += res.succeeded
  if (res.stop === 'idle') break
}
process.stdout.write(JSON.stringify({ succeeded, heapUsedMb: Math.round(process.memoryUsage().heapUsed / 2 ** 20) }) + '\n')
await closeDeps(deps)
process.exit(0)
