// GET …/variables (names and update times, never values), PUT (the CLI's --mode set), PATCH (merge),
// either with ?mode=append-only-missing, and DELETE …/variables/:name.
import { z } from 'zod'
import { deleteVariable, listVariableNames } from '../../db/variable-names.js'
import type { VariablesMode } from '../../db/variables.js'
import { setProjectVariables } from '../../operate/variables.js'
import { MAX_VARIABLE_CHARS } from '../../schema/limits.js'
import { variablesJson } from '../../shapes.js'
import type { Route, RouteContext } from '../types.js'
import { nameSchema, notFound, param, projectOf, queryOf, validated } from './common.js'

/** Names the templates can substitute (docs/delivery.md), as the CLI accepts them: any other could never be used. */
const variableName = nameSchema.regex(/^[A-Za-z0-9_]+$/, 'expected letters, digits and _ only')

// The value's bound and NUL are checked by setVariables (lib/db/variables.ts), as for every door; the
// schema's max lets the OpenAPI document say it.
const variableValue = z.string().max(MAX_VARIABLE_CHARS, `a value has at most ${MAX_VARIABLE_CHARS} characters`)
/** The body of PUT and PATCH …/variables: names to values. */
export const variablesBody = z.object({ variables: z.record(variableName, variableValue) }).strict()
const modeQuery = z.object({ mode: z.literal('append-only-missing').optional() }).strict()

/** The names after a change: the answer never carries a value, not even the ones just sent. */
async function names(ctx: RouteContext, project: string) {
  return { status: 200, body: { variables: variablesJson(await listVariableNames(ctx.deps.db, project)) } }
}

const write = (mode: VariablesMode) => async (ctx: RouteContext) => {
  const project = projectOf(ctx)
  const q = queryOf(ctx, modeQuery)
  const { variables } = variablesBody.parse(ctx.body)
  const setter = ctx.principal.kind === 'system' || ctx.principal.role === 'admin' ? 'admin' : 'non-admin'
  await validated(() => setProjectVariables(ctx.deps.db, { project, vars: variables, mode: q.mode ?? mode, setter }))
  return names(ctx, project)
}

async function remove(ctx: RouteContext) {
  const project = projectOf(ctx)
  const name = param(ctx, 'name', nameSchema)
  if (!(await deleteVariable(ctx.deps.db, project, name))) throw notFound('no variable of that name')
  return { status: 204 }
}

/** The variable routes. */
export const variableRoutes: Route[] = [
  { method: 'GET', path: '/v1/projects/:project/variables', need: 'view', handle: ctx => names(ctx, projectOf(ctx)) },
  { method: 'PUT', path: '/v1/projects/:project/variables', need: 'variables', handle: write('set') },
  { method: 'PATCH', path: '/v1/projects/:project/variables', need: 'variables', handle: write('merge') },
  { method: 'DELETE', path: '/v1/projects/:project/variables/:name', need: 'variables', handle: remove },
]
