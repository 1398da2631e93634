// Variables as the admin API shows them: names only. The values stay in the database, so no
// answer or log line built from these rows can hold one.
import type { Queryable } from './pool.js'

/** A variable without its value, with when its value last changed (migration 014). */
export type VariableName = { name: string; updated_at: Date }

/** The project's variable names, in name order; values are not read. */
export async function listVariableNames(db: Queryable, project: string): Promise<VariableName[]> {
  const { rows } = await db.query<VariableName>('SELECT name, updated_at FROM actions_variable WHERE project = $1 ORDER BY name', [project])
  return rows
}

/** Deletes one variable; returns false when the project had no variable of that name. */
export async function deleteVariable(db: Queryable, project: string, name: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM actions_variable WHERE project = $1 AND name = $2', [project, name])
  return rowCount === 1
}
