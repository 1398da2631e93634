import type { Queryable } from './pool.js'
import { withTransaction } from './pool.js'
import type pg from 'pg'
import { ValidationError } from '../errors.js'
import { assertNames, variableValueProblem } from '../schema/limits.js'

/** Upstream's variable-setting modes: MERGE overwrites the given names, SET replaces all, APPEND_ONLY_MISSING adds new names only. */
export type VariablesMode = 'merge' | 'set' | 'append-only-missing'

/** The project's variables as a name → value map. Values are secrets: callers never log them. */
export async function fetchVariables(db: Queryable, project: string): Promise<Map<string, string>> {
  // Drains read the variables with the schema, in one statement (getSchemaAndVariables in lib/db/schemas.ts).
  const { rows } = await db.query<{ name: string; value: string }>('SELECT name, value FROM actions_variable WHERE project = $1', [project])
  return new Map(rows.map(r => [r.name, r.value]))
}

/**
 * Writes variables in one transaction according to `mode`. Names longer than MAX_NAME_BYTES and values
 * longer than MAX_VARIABLE_CHARS (or holding NUL) are refused, nothing written: every door that sets
 * variables (REST, GraphQL, the CLI) comes here, so the bound is the same for all.
 */
export async function setVariables(pool: pg.Pool, project: string, vars: Record<string, string>, mode: VariablesMode): Promise<void> {
  const names = Object.keys(vars)
  assertNames('variables', [['project', project], ...names.map((n, i) => [`variables.${i}`, n] as const)])
  const values = names.map(n => vars[n] ?? '')
  // Problems name the variable (a name is no secret), never its value.
  const problems = values.flatMap((v, i) => variableValueProblem(`variables.${names[i]?.slice(0, 64) ?? i}`, v) ?? [])
  if (problems.length) throw new ValidationError('variables', problems.slice(0, 20))
  // updated_at moves only when a value changes: SET keeps the names it repeats, so their times stay.
  const onConflict =
    mode === 'append-only-missing'
      ? 'NOTHING'
      : `UPDATE SET value = excluded.value,
           updated_at = CASE WHEN actions_variable.value IS DISTINCT FROM excluded.value THEN now() ELSE actions_variable.updated_at END`
  await withTransaction(pool, async client => {
    if (mode === 'set')
      await client.query('DELETE FROM actions_variable WHERE project = $1 AND NOT (name = ANY($2::text[]))', [project, names])
    await client.query(
      `INSERT INTO actions_variable (project, name, value, updated_at)
       SELECT $1, n, v, now() FROM unnest($2::text[], $3::text[]) AS t(n, v)
       ON CONFLICT (project, name) DO ${onConflict}`,
      [project, names, values],
    )
  })
}
