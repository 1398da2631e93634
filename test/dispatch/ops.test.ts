// Operational events: with OPS_PROJECT set, the engine enqueues what an operator
// would be paged for into that project, and an ordinary schema delivers it like any event.
import { beforeAll, describe, expect, it } from 'vitest'
import { storeSchema } from '../../lib/db/schemas.js'
import { drainProject } from '../../lib/dispatch/drain.js'
import { enqueueMany, schemaFor, targetHealth } from '../helpers/events.js'
import { FOREVER, useHarness } from '../helpers/harness.js'

const env = useHarness({
  config: { OPS_PROJECT: 'ops', DISPATCH_CONCURRENCY: '1', BREAKER_FAILURES: '2' },
  receivers: {
    app: (_, res) => {
      res.statusCode = 401
      res.end()
    },
    pager: true,
  },
})
const app = () => env.receiver('app')
const pager = () => env.receiver('pager')

beforeAll(async () => {
  const trigger = (entity: string) => ({
    type: 'basic',
    name: entity.replace('.', '_'),
    entity,
    create: true,
    delete: false,
    update: false,
    target: 'pager',
  })
  await storeSchema(env.deps.db, 'ops', {
    targets: { pager: { type: 'webhook', name: 'pager', url: pager().url } },
    triggers: Object.fromEntries(
      ['target.paused', 'target.needs_operator', 'target.resumed', 'events.gave_up'].map(e => [e.replace('.', '_'), trigger(e)]),
    ),
  })
})

describe('OPS_PROJECT', () => {
  it('receives target.needs_operator for a target answering 401, with the reason and no URL', async () => {
    await schemaFor(env.deps, 'app', { t: { url: app().url + '/secret-path', maxAttempts: 5, initialRepeatIntervalMs: 1 } })
    await enqueueMany(env.deps, 'app', 'to_t', 3)
    for (let i = 0; i < 20 && !(await targetHealth(env.deps.db, 'app', 't'))?.paused_at; i++) await drainProject(env.deps, 'app', FOREVER)
    expect(await targetHealth(env.deps.db, 'app', 't')).toMatchObject({ paused_reason: 'misconfigured', pause_detail: '401' })
    await drainProject(env.deps, 'ops', FOREVER)
    const events = pager().requests.flatMap(r => r.body.events as Array<Record<string, unknown>>)
    expect(events).toHaveLength(1)
    expect(events[0]).toMatchObject({
      operation: 'create',
      entity: 'target.needs_operator',
      values: {
        project: 'app',
        target: 't',
        reason: 'misconfigured (401)',
        at: expect.stringMatching(/^\d{4}-/),
        pausedAt: expect.stringMatching(/^\d{4}-/),
      },
      meta: { trigger: 'target_needs_operator', target: 'pager' },
    })
    expect(JSON.stringify(pager().requests.map(r => r.body))).not.toContain(app().url)
    expect(JSON.stringify(pager().requests.map(r => r.body))).not.toContain('secret-path')
  })
})
