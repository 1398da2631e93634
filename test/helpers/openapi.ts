// Checks real answers of the REST routes against the OpenAPI document they serve: the
// response schema of the route and status is compiled from the document with ajv (draft 2020-12, as
// OpenAPI 3.1 uses) and ajv-formats, so a test fails when an answer and the document disagree.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import { expect } from 'vitest'
import { openApiDocument } from '../../lib/admin/openapi.js'
import type { Route, RouteResult } from '../../lib/admin/types.js'

const doc = openApiDocument()
// ajv-formats is CommonJS with a default export; under NodeNext its namespace's default is the function.
const addFormats = addFormatsModule.default
const ajv = new Ajv2020({ strict: false, allErrors: true })
addFormats(ajv)
// The document itself, so `#/components/schemas/…` references resolve inside it.
ajv.addSchema({ ...doc, $id: 'openapi.json' })
const compiled = new Map<string, ValidateFunction>()

/** The document's path for a route path (`:name` → `{name}`). */
export const openApiPath = (path: string) => path.replace(/:(\w+)/g, '{$1}')

/** The compiled schema of an answer, or undefined when the document describes none for the route and status. */
function responseValidator(method: string, path: string, status: number): ValidateFunction | 'no body' | undefined {
  const pointer = ['paths', openApiPath(path), method.toLowerCase(), 'responses', String(status)].map(escape).join('/')
  const response = ajv.getSchema(`openapi.json#/${pointer}`)?.schema
  if (typeof response !== 'object' || response === null) return undefined
  const content = 'content' in response ? response.content : undefined
  if (content === undefined) return 'no body'
  const media = status >= 400 ? 'application/problem+json' : 'application/json'
  const key = `${pointer}/content/${escape(media)}/schema`
  let validate = compiled.get(key)
  if (!validate) {
    validate = ajv.compile({ $ref: `openapi.json#/${key}` })
    compiled.set(key, validate)
  }
  return validate
}

// JSON Pointer escapes (RFC 6901), then URI fragment encoding for `{` and `}`.
const escape = (segment: string) => encodeURIComponent(segment.replace(/~/g, '~0').replace(/\//g, '~1'))

/** Asserts that `result`, the answer of `route`, is one the document describes: a documented status, and a body its schema accepts. */
export function expectDocumented(route: Pick<Route, 'method' | 'path'>, result: RouteResult): void {
  const validate = responseValidator(route.method, route.path, result.status)
  expect(validate, `${route.method} ${route.path} ${result.status} is not in the OpenAPI document`).toBeDefined()
  if (validate === 'no body') {
    expect(result.body).toBeUndefined()
    return
  }
  // The answer as a client reads it: serialized, then parsed (Dates become strings, undefined goes).
  const body: unknown = JSON.parse(JSON.stringify(result.body ?? null))
  const ok = validate?.(body)
  expect(ok, `${route.method} ${route.path} ${result.status}: ${ajv.errorsText(validate?.errors ?? [])}`).toBe(true)
}

/** Asserts that a problem answer (what the router makes of a thrown error) matches the document's Problem schema. */
export function expectProblem(route: Pick<Route, 'method' | 'path'>, status: number, problem: unknown): void {
  expectDocumented(route, { status, body: problem })
}

/** The route of `restRoutes` with this method and path pattern; throws when there is none. */
export function routeOf(routes: readonly Route[], method: Route['method'], path: string): Route {
  const route = routes.find(r => r.method === method && r.path === path)
  if (!route) throw new Error(`no route ${method} ${path}`)
  return route
}

/** The route pattern a concrete path matches (literal segments first), for checking router answers against the document. */
export function routeForPath(routes: readonly Route[], method: string, path: string): Route | undefined {
  const segments = path.split('/')
  const fits = (r: Route) => {
    const pattern = r.path.split('/')
    return r.method === method && pattern.length === segments.length && pattern.every((p, i) => p.startsWith(':') || p === segments[i])
  }
  return routes.find(fits)
}
