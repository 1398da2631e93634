import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { drainProject } from '../../lib/dispatch/drain.js'
import { setVariables } from '../../lib/db/variables.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'
import { testEnv, type TestEnv } from '../helpers/runtime.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'

// A variable may sit anywhere in a target's URL (README: The enqueue contract); the substituted URL is
// checked at dispatch, where one that is not a URL fails its attempt without a request.

let env: TestEnv
let rx: Receiver
let port: string
const forever = { remainingMs: () => Number.POSITIVE_INFINITY }
let n = 0
let project: string

beforeAll(async () => {
  env = await testEnv({ BREAKER_FAILURES: '0' })
  rx = await startReceiver()
  port = new URL(rx.url).port
})
afterAll(async () => {
  await rx.close()
  await env.close()
})
beforeEach(async () => {
  project = `p${++n}`
  rx.requests.length = 0
  await env.queue.drain()
})

describe('a variable in the URL authority', () => {
  it('delivers to the port a PORT variable holds', async () => {
    await setVariables(env.deps.db, project, { PORT: port }, 'set')
    await schemaFor(env.deps, project, { t: { url: 'http://127.0.0.1:{{PORT}}/hook' } })
    const ids = await enqueueMany(env.deps, project, 'to_t', 2)
    expect(await drainProject(env.deps, project, forever)).toMatchObject({ succeeded: 2, retried: 0 })
    expect(rx.requests.map(r => r.path)).toEqual(['/hook', '/hook'])
    expect(rx.eventIds().sort()).toEqual([...ids].sort())
  })

  it('delivers when both host and port come from variables', async () => {
    await setVariables(env.deps.db, project, { HOST: '127.0.0.1', PORT: port }, 'set')
    await schemaFor(env.deps, project, { t: { url: 'http://{{HOST}}:{{PORT}}/in' } })
    await enqueueMany(env.deps, project, 'to_t', 1)
    expect(await drainProject(env.deps, project, forever)).toMatchObject({ succeeded: 1 })
    expect(rx.requests.map(r => r.path)).toEqual(['/in'])
  })

  for (const junk of ['abc', '99999']) {
    it(`fails the attempt with "Invalid URL", without a request, when PORT holds ${junk}`, async () => {
      await setVariables(env.deps.db, project, { PORT: junk }, 'set')
      await schemaFor(env.deps, project, { t: { url: 'http://127.0.0.1:{{PORT}}/hook', maxAttempts: 3 } })
      await enqueueMany(env.deps, project, 'to_t', 1)
      expect(await drainProject(env.deps, project, forever)).toMatchObject({ succeeded: 0, retried: 1 })
      const [row] = [...(await states(env.deps, project)).values()]
      expect(row?.state).toBe('retrying')
      expect(row?.log).toEqual([{ ok: false, errorMessage: 'Invalid URL', durationMs: expect.any(Number) }])
      expect(rx.requests).toHaveLength(0)
    })
  }
})
