// The CLI's --json: every document parses and is what lib/shapes.ts makes of
// the same rows, a listing is NDJSON with one line per item, errors stay on stderr with their exit codes.
import { describe, expect, it } from 'vitest'
import { createHandler } from '../../functions/dispatch.js'
import { eventDetailJson, listedEventJson, targetJson, variablesJson } from '../../lib/shapes.js'
import { readTargetBacklog } from '../../lib/db/admin-events.js'
import { readTargetOutcomes } from '../../lib/db/admin-recent.js'
import { getEvent, listEvents, type Listing } from '../../lib/db/operator.js'
import { listTargetHealth } from '../../lib/db/pauses.js'
import { listVariableNames } from '../../lib/db/variable-names.js'
import { getCurrentSchema } from '../../lib/db/schemas.js'
import { redactor } from '../../lib/text.js'
import { runCli } from '../helpers/cli.js'
import { enqueueMany, schemaFor } from '../helpers/events.js'
import { useHarness } from '../helpers/harness.js'
import { createContext, sqsEvent } from '../helpers/lambda.js'

const CANARY = 'canary-Vq7-secret'
// The receiver echoes the canary in every failure it answers, as a leaky receiver would.
const env = useHarness({
  config: { DISPATCH_TIME_MARGIN_MS: '1000', BREAKER_FAILURES: '0' },
  receiver: (_, res) => {
    res.statusCode = 500
    res.end(`denied for ${CANARY}`)
  },
})
const handler = createHandler(() => env.deps)
const run = (...argv: string[]) => runCli(env.cliEnv(), argv)
const ndjson = (text: string): unknown[] => (text === '' ? [] : text.split('\n').map(l => JSON.parse(l)))

/** A project with failed events (their stored response holding the canary, a variable's value) and due ones. */
async function failedProject(project: string): Promise<string[]> {
  await schemaFor(env.deps, project, { t: { url: env.rx.url, maxAttempts: 1 }, u: { url: env.rx.url } })
  expect(await run('variables', 'set', project, `KEY=${CANARY}`, 'OTHER=x-value')).toMatchObject({ code: 0 })
  const failed = await enqueueMany(env.deps, project, 'to_t', 3)
  await handler(sqsEvent(JSON.stringify({ project })), createContext())
  await env.deps.db.query(
    `UPDATE actions_event SET log = log || jsonb_build_array(jsonb_build_object('ok', false, 'errorMessage', $2::text)) WHERE id = $1`,
    [failed[0], `refused ${CANARY}`],
  )
  await enqueueMany(env.deps, project, 'to_u', 2, 10)
  return failed
}

describe('--json', () => {
  it.each<Listing>(['failed', 'due', 'processing'])(
    'prints events %s as NDJSON: one listedEventJson per listed row, redacted',
    async listing => {
      const project = env.project
      const [, , leased] = await failedProject(project)
      // A lease that has not run out, as a dispatcher holds one mid-delivery.
      if (listing === 'processing')
        await env.deps.db.query(`UPDATE actions_event SET state = 'processing', lease_until = now() + interval '1 hour' WHERE id = $1`, [
          leased,
        ])
      const res = await run('events', listing, project, '--json')
      expect(res).toMatchObject({ code: 0, err: '' })
      const rows = await listEvents(env.deps.db, project, listing, 50, 10_000)
      const docs = ndjson(res.out)
      expect(docs).toHaveLength(rows.length)
      expect(docs).toEqual(rows.map(r => listedEventJson(r, redactor([CANARY, 'x-value']))))
      expect(res.out).not.toContain(CANARY)
      if (listing === 'failed') expect(res.out).toContain('[redacted]')
      expect(rows.length).toBeGreaterThan(0)
    },
  )

  it('prints events show as one eventDetailJson document, its whole log redacted', async () => {
    const [id] = await failedProject(env.project)
    const res = await run('events', 'show', id ?? '', '--json')
    expect(res).toMatchObject({ code: 0, err: '' })
    expect(res.out.split('\n')).toHaveLength(1)
    const row = await getEvent(env.deps.db, env.project, id ?? '')
    expect(row).toBeDefined()
    if (row) expect(JSON.parse(res.out)).toEqual(eventDetailJson(row, redactor([CANARY, 'x-value'])))
    expect(JSON.parse(res.out).log).toHaveLength(2)
    expect(res.out).not.toContain(CANARY)
  })

  it('prints targets list as NDJSON of targetJson, with each target backlog and recent outcomes', async () => {
    const project = env.project
    await failedProject(project)
    await run('targets', 'pause', project, 'u')
    const res = await run('targets', 'list', project, '--json')
    expect(res).toMatchObject({ code: 0, err: '' })
    const health = new Map((await listTargetHealth(env.deps.db, project)).map(h => [h.target, h]))
    const backlog = await readTargetBacklog(env.deps.db, project)
    const recent = await readTargetOutcomes(env.deps.db, project)
    const docs = ndjson(res.out)
    expect(docs).toHaveLength(2)
    // The backlog's age moves with the clock between the two reads: compared apart, roughly.
    const age = (d: unknown) => (typeof d === 'object' && d !== null && 'oldestDueAgeSeconds' in d ? d.oldestDueAgeSeconds : undefined)
    const expected = ['t', 'u'].map(t => targetJson(t, true, health.get(t), backlog.get(t), recent.byTarget.get(t)))
    expect(docs.map(d => ({ ...Object(d), oldestDueAgeSeconds: 0 }))).toEqual(expected.map(d => ({ ...d, oldestDueAgeSeconds: 0 })))
    docs.forEach((d, i) => expect(age(d)).toBeCloseTo(expected[i]?.oldestDueAgeSeconds ?? -1, 0))
    expect(docs[1]).toMatchObject({ target: 'u', state: 'paused', pause: { kind: 'operator' }, due: 2 })
    expect(docs[0]).toMatchObject({ target: 't', recent: { succeeded: 0, failed: 3, successRate: 0 } })
  })

  it('prints variables list as NDJSON of names (values only with --show-values), and the schema as one document', async () => {
    const project = env.project
    await failedProject(project)
    const names = await run('variables', 'list', project, '--json')
    expect(ndjson(names.out)).toEqual(variablesJson(await listVariableNames(env.deps.db, project)))
    expect(ndjson(names.out)).toEqual([
      { name: 'KEY', updatedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/) },
      { name: 'OTHER', updatedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/) },
    ])
    expect(names.out).not.toContain(CANARY)
    expect(ndjson((await run('variables', 'list', project, '--json', '--show-values')).out)).toEqual([
      { name: 'KEY', updatedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/), value: CANARY },
      { name: 'OTHER', updatedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/), value: 'x-value' },
    ])
    const schema = await run('schema', 'get', project, '--json')
    const current = await getCurrentSchema(env.deps.db, project)
    expect(schema.out.split('\n')).toHaveLength(1)
    expect(JSON.parse(schema.out)).toEqual({ version: current?.version, schema: current?.schema })
  })

  it('prints one document for each change, the wake-up line on stderr so stdout stays JSON', async () => {
    const project = env.project
    const [a, b] = await failedProject(project)
    await env.queue.drain()
    const retried = await run('events', 'retry', a ?? '', '--json')
    expect(retried.code).toBe(0)
    expect(JSON.parse(retried.out)).toEqual({ id: a, project, due: true })
    expect(retried.err).toBe(`signalled project ${project}`)
    expect(JSON.parse((await run('events', 'stop', b ?? '', '--json')).out)).toEqual({ id: b, project, state: 'stopped' })
    const bulk = await run('events', 'retry', '--project', project, '--json')
    expect(JSON.parse(bulk.out)).toEqual({ project, state: 'failed', changed: 1, skipped: 0, limit: 100_000, limitReached: false })
    expect(JSON.parse((await run('variables', 'set', project, 'N=1', '--json')).out)).toEqual({ project, mode: 'merge', set: 1 })
    const paused = JSON.parse((await run('targets', 'pause', project, 't', '--json')).out)
    expect(paused).toEqual({ project, target: 't', state: 'paused', since: expect.any(String) })
    expect(JSON.parse((await run('targets', 'resume', project, 't', '--json')).out)).toEqual({
      project,
      target: 't',
      state: 'running',
      wasPaused: true,
    })
    expect(JSON.parse((await run('migrate', '--json')).out)).toEqual({ applied: [] })
    expect(JSON.parse((await run('signing', 'new', '--json')).out)).toEqual({ secret: expect.stringMatching(/^whsec_/) })
  })

  it('keeps errors on stderr with their exit codes: nothing on stdout', async () => {
    const unknown = await run('events', 'show', '00000000-0000-4000-8000-000000000000', '--json')
    expect(unknown).toMatchObject({ code: 1, out: '' })
    expect(unknown.err).toContain('no event 00000000-0000-4000-8000-000000000000')
    const usage = await run('events', 'failed', 'p', '--limit', 'x', '--json')
    expect(usage).toMatchObject({ code: 2, out: '' })
    expect(usage.err).toContain('--limit: expected a positive integer')
    expect(await runCli({}, ['events', 'failed', 'p', '--json'])).toMatchObject({ code: 2, out: '', err: 'DATABASE_URL: required' })
  })
})
