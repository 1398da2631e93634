// The admin API's OpenAPI 3.1 document: it validates with a kept OpenAPI validator, names
// every REST route, and the helper the REST tests check their answers with rejects an answer that
// disagrees with it (so those checks can fail).
import { Validator } from '@seriousme/openapi-schema-validator'
import { describe, expect, it } from 'vitest'
import { documentedRoutes, openApiDocument } from '../../lib/admin/openapi.js'
import { restRoutes } from '../../lib/admin/rest.js'
import { useHarness } from '../helpers/harness.js'
import { expectDocumented, routeOf } from '../helpers/openapi.js'

const env = useHarness()

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator()
    const result = await validator.validate(openApiDocument())
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
    expect(validator.version).toBe('3.1')
  })

  it('documents every REST route and no route that does not exist', () => {
    const routes = restRoutes.map(r => `${r.method} ${r.path}`).sort()
    expect(
      documentedRoutes()
        .map(r => `${r.method} ${r.path}`)
        .sort(),
    ).toEqual(routes)
  })

  it('is what GET /v1/openapi.json answers, for any valid caller', async () => {
    const route = routeOf(restRoutes, 'GET', '/v1/openapi.json')
    expect(route.path.includes(':project')).toBe(false)
    const res = await route.handle({
      deps: env.deps,
      principal: { kind: 'system' },
      params: {},
      query: new URLSearchParams(),
      body: undefined,
    })
    expectDocumented(route, res)
    expect(res.body).toEqual(openApiDocument())
  })

  it('describes bearer tokens, IAM and problems', () => {
    const doc = JSON.stringify(openApiDocument())
    expect(doc).toContain('"scheme":"bearer"')
    expect(doc).toContain('AWS_IAM')
    expect(doc).toContain('application/problem+json')
  })
})

describe('expectDocumented', () => {
  const stats = routeOf(restRoutes, 'GET', '/v1/projects/:project/stats')
  const good = {
    project: 'p',
    counts: { created: 0, retrying: 0, processing: 0, succeed: 1, failed: 0, stopped: 0 },
    countsComplete: true,
    due: 0,
    dueAtPausedTargets: 0,
    oldestDueAgeSeconds: 0,
    failedLast24h: 0,
    failedLast24hCapped: false,
    lastProgressAt: null,
    lastProgressAgeSeconds: null,
  }

  it('accepts an answer the document describes', () => {
    expectDocumented(stats, { status: 200, body: good })
    expectDocumented(stats, { status: 404, body: { type: 'about:blank', title: 'Not found', status: 404, detail: 'x' } })
  })

  it('rejects a missing field, an extra field, a wrong type and an undocumented status', () => {
    const { due: _, ...missing } = good
    for (const body of [missing, { ...good, value: 'secret' }, { ...good, due: '1' }]) {
      expect(() => expectDocumented(stats, { status: 200, body })).toThrow()
    }
    expect(() => expectDocumented(stats, { status: 201, body: good })).toThrow(/not in the OpenAPI document/)
  })
})
