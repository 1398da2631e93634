import { beforeAll, describe, expect, it } from 'vitest'
import { drainProject } from '../../lib/dispatch/drain.js'
import { setVariables } from '../../lib/db/variables.js'
import { FOREVER, useHarness } from '../helpers/harness.js'
import { enqueueMany, schemaFor, states } from '../helpers/events.js'

// A variable may sit anywhere in a target's URL (README: The enqueue contract); the substituted URL is
// checked at dispatch, where one that is not a URL fails its attempt without a request.

const env = useHarness({ config: { BREAKER_FAILURES: '0' }, receiver: true })
let port: string
beforeAll(() => {
  port = new URL(env.rx.url).port
})

describe('a variable in the URL authority', () => {
  it('delivers to the port a PORT variable holds', async () => {
    await setVariables(env.deps.db, env.project, { PORT: port }, 'set')
    await schemaFor(env.deps, env.project, { t: { url: 'http://127.0.0.1:{{PORT}}/hook' } })
    const ids = await enqueueMany(env.deps, env.project, 'to_t', 2)
    expect(await drainProject(env.deps, env.project, FOREVER)).toMatchObject({ succeeded: 2, retried: 0 })
    expect(env.rx.requests.map(r => r.path)).toEqual(['/hook', '/hook'])
    expect(env.rx.eventIds().sort()).toEqual([...ids].sort())
  })

  it('delivers when both host and port come from variables', async () => {
    await setVariables(env.deps.db, env.project, { HOST: '127.0.0.1', PORT: port }, 'set')
    await schemaFor(env.deps, env.project, { t: { url: 'http://{{HOST}}:{{PORT}}/in' } })
    await enqueueMany(env.deps, env.project, 'to_t', 1)
    expect(await drainProject(env.deps, env.project, FOREVER)).toMatchObject({ succeeded: 1 })
    expect(env.rx.requests.map(r => r.path)).toEqual(['/in'])
  })

  for (const junk of ['abc', '99999']) {
    it(`fails the attempt with "Invalid URL", without a request, when PORT holds ${junk}`, async () => {
      await setVariables(env.deps.db, env.project, { PORT: junk }, 'set')
      await schemaFor(env.deps, env.project, { t: { url: 'http://127.0.0.1:{{PORT}}/hook', maxAttempts: 3 } })
      await enqueueMany(env.deps, env.project, 'to_t', 1)
      expect(await drainProject(env.deps, env.project, FOREVER)).toMatchObject({ succeeded: 0, retried: 1 })
      const [row] = [...(await states(env.deps, env.project)).values()]
      expect(row?.state).toBe('retrying')
      expect(row?.log).toEqual([{ ok: false, errorMessage: 'Invalid URL', durationMs: expect.any(Number) }])
      expect(env.rx.requests).toHaveLength(0)
    })
  }
})
