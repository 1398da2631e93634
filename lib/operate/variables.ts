// The operator verb that sets a project's variables, as REST (PUT/PATCH), GraphQL (setVariables) and
// the CLI call it: the value bound is setVariables' own (lib/db/variables.ts); the rule on where a
// non-admin may send the targets is lib/delivery/hosts.ts's, checked here against the current schema.
import type pg from 'pg'
import { getSchemaAndVariables } from '../db/schemas.js'
import { setVariables, type VariablesMode } from '../db/variables.js'
import { movedTargets } from '../delivery/hosts.js'
import { ValidationError } from '../errors.js'

/** Who sets the variables: an admin (or a system caller, the CLI's operator) may move any target. */
export type Setter = 'admin' | 'non-admin'

/** The variables after a change in `mode`, as setVariables writes them. */
function applied(current: ReadonlyMap<string, string>, vars: Record<string, string>, mode: VariablesMode): Map<string, string> {
  if (mode === 'set') return new Map(Object.entries(vars))
  const next = new Map(current)
  for (const [name, value] of Object.entries(vars)) if (mode === 'merge' || !next.has(name)) next.set(name, value)
  return next
}

/**
 * Sets `vars` in `mode`. A non-admin's change that would move a target of the current schema to a
 * host outside its `allowedHosts` is refused whole (a ValidationError naming the targets, never a
 * value or a host), nothing written. The check reads the variables and the schema, then writes: a
 * schema stored in between is still bounded at delivery, where `allowedHosts` is checked again.
 */
export async function setProjectVariables(
  db: pg.Pool,
  input: { project: string; vars: Record<string, string>; mode: VariablesMode; setter: Setter },
): Promise<void> {
  if (input.setter === 'non-admin') {
    const { stored, variables } = await getSchemaAndVariables(db, input.project)
    const moved = movedTargets(stored?.schema.targets ?? {}, variables, applied(variables, input.vars, input.mode))
    if (moved.length)
      throw new ValidationError(
        'variables',
        moved
          .slice(0, 20)
          .map(
            key =>
              `targets.${key.slice(0, 64)}: the change moves the target's URL to a host its allowedHosts does not list; only an admin may (docs/security.md)`,
          ),
      )
  }
  await setVariables(db, input.project, input.vars, input.mode)
}
