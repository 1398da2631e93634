// A hostile document never reaches the executor: too large, too many tokens, too deep, too many
// selections once fragments are expanded, too many root fields. Each is refused with a clear error, at
// once; a body that is not a GraphQL request is a 400.
import { getIntrospectionQuery } from 'graphql'
import { z } from 'zod'
import { describe, expect, it } from 'vitest'
import { graphqlRoute } from '../../lib/admin/graphql.js'
import {
  MAX_QUERY_CHARS,
  MAX_QUERY_DEPTH,
  MAX_QUERY_SELECTIONS,
  MAX_QUERY_TOKENS,
  MAX_ROOT_FIELDS,
} from '../../lib/admin/graphql/bounds.js'
import { useHarness } from '../helpers/harness.js'

const env = useHarness({ project: 'bounds' })

type Answer = { data?: Record<string, unknown> | null; errors?: Array<{ message: string; extensions?: { code?: string } }> }

async function send(body: unknown) {
  const started = performance.now()
  const res = await graphqlRoute.handle({
    deps: env.deps,
    principal: { kind: 'system' },
    params: { project: env.project },
    query: new URLSearchParams(),
    body,
  })
  return { status: res.status, ms: performance.now() - started, ...(res.body as Answer) }
}

// `levels` ofType fields under __schema and types, with name at the bottom: levels + 3 deep.
const nested = (levels: number) => `{ __schema { types { ${'ofType { '.repeat(levels)}name${' }'.repeat(levels)} } } }`

describe('hostile queries', () => {
  const cases: Array<[string, string, RegExp]> = [
    [
      'a document over the size bound',
      `{ ${' '.repeat(MAX_QUERY_CHARS)}__typename }`,
      new RegExp(`more than ${MAX_QUERY_CHARS} characters`),
    ],
    ['a document of too many tokens', `{ ${'a '.repeat(MAX_QUERY_TOKENS)}}`, /tokens/],
    ['fields nested one past the bound', nested(MAX_QUERY_DEPTH - 2), new RegExp(`deeper than ${MAX_QUERY_DEPTH}`)],
    [
      'fragments that double at every level',
      `{ __schema { ...F20 } } fragment F0 on __Schema { description } ${Array.from({ length: 20 }, (_, i) => `fragment F${i + 1} on __Schema { ...F${i} ...F${i} }`).join(' ')}`,
      new RegExp(`more than ${MAX_QUERY_SELECTIONS} selections`),
    ],
    [
      'too many aliases of a listing',
      `{ ${Array.from({ length: MAX_ROOT_FIELDS + 1 }, (_, i) => `a${i}: failedEvents(args: { limit: 10000 }) { id }`).join(' ')} }`,
      new RegExp(`more than ${MAX_ROOT_FIELDS} root fields`),
    ],
    ['a fragment cycle', '{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }', /Cannot spread fragment "A" within itself/],
    ['a syntax error', '{ failedEvents { id }', /Syntax Error/],
  ]
  for (const [what, query, message] of cases) {
    it(`refuses ${what} with a clear error and HTTP 400, as upstream's engine, at once`, async () => {
      const res = await send({ query })
      expect(res.status).toBe(400)
      expect(res.data).toBeNull()
      expect(res.errors).toHaveLength(1)
      expect(res.errors?.[0]?.message).toMatch(message)
      expect(res.ms).toBeLessThan(500)
    })
  }

  it('takes the deepest query the bound allows and the standard introspection query', async () => {
    expect((await send({ query: nested(MAX_QUERY_DEPTH - 3) })).errors).toBeUndefined()
    const res = await send({ query: getIntrospectionQuery() })
    expect(res.errors).toBeUndefined()
    const introspected = z
      .object({
        __schema: z.object({
          types: z.array(
            z.object({
              name: z.string(),
              fields: z.array(z.object({ name: z.string() })).nullable(),
              enumValues: z.array(z.object({ name: z.string() })).nullable(),
            }),
          ),
        }),
      })
      .parse(res.data)
    const type = (name: string) => introspected.__schema.types.find(t => t.name === name)
    expect(type('Query')?.fields?.map(f => f.name)).toEqual(['failedEvents', 'eventsToProcess', 'eventsInProcessing', 'event', 'variables'])
    expect(type('Mutation')?.fields?.map(f => f.name)).toEqual(['processBatch', 'retryEvent', 'stopEvent', 'setVariables'])
    expect(type('SetVariablesMode')?.enumValues?.map(v => v.name)).toEqual(['MERGE', 'SET', 'APPEND_ONLY_MISSING'])
  })

  it('names a misplaced string token by its kind only: it may be a value', async () => {
    const res = await send({ query: 'mutation { setVariables(args: { variables: [{ name: "A" value "s3cret-value" }] }) { ok } }' })
    expect(res.errors?.[0]?.message).toBe('Syntax Error: Expected ":", found String.')
  })

  it('runs the operation operationName names', async () => {
    const query = 'query A { __typename } query B { variables { name } }'
    expect((await send({ query, operationName: 'B' })).data).toEqual({ variables: [] })
    expect((await send({ query })).errors?.[0]?.message).toMatch(/operation name/)
  })
})

describe('bodies that are not GraphQL requests', () => {
  for (const [what, body] of [
    ['no body', undefined],
    ['an empty object', {}],
    ['a query that is not a string', { query: 5 }],
    ['variables that are a list', { query: '{ __typename }', variables: [] }],
    ['a JSON string', 'query { __typename }'],
  ] as const) {
    it(`answers ${what} with 400 and the reason`, async () => {
      const res = await send(body)
      expect(res.status).toBe(400)
      expect(res.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_REQUEST' } })
      expect(res.errors?.[0]?.message).toMatch(/^Not a GraphQL request: /)
    })
  }
})
