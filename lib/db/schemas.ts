import type { ActionsSchema, SchemaParseOptions } from '../schema/actions.js'
import { parseActionsSchema, parseStoredActionsSchema } from '../schema/actions.js'
import type { Queryable } from './pool.js'

export type StoredSchema = { version: number; schema: ActionsSchema }

/** The project's current actions schema (highest version), or undefined for an unknown project. */
export async function getCurrentSchema(db: Queryable, project: string): Promise<StoredSchema | undefined> {
  const { rows } = await db.query<{ version: number; schema: unknown }>(
    'SELECT version, schema FROM actions_schema WHERE project = $1 ORDER BY version DESC LIMIT 1',
    [project],
  )
  const row = rows[0]
  // Shape only: a version stored before a bound existed must not stop its project (dispatch holds such targets back).
  return row && { version: row.version, schema: parseStoredActionsSchema(row.schema) }
}

/** Validates (with the bounds of `opts`, see parseActionsSchema) and stores a new version of the project's actions schema; returns its version number. */
export async function storeSchema(db: Queryable, project: string, input: unknown, opts: SchemaParseOptions = {}): Promise<number> {
  const schema = parseActionsSchema(input, opts)
  const { rows } = await db.query<{ version: number }>(
    `INSERT INTO actions_schema (project, version, schema)
     SELECT $1, coalesce(max(version), 0) + 1, $2::jsonb FROM actions_schema WHERE project = $1
     RETURNING version`,
    [project, JSON.stringify(schema)],
  )
  const row = rows[0]
  if (!row) throw new Error('storing the schema returned no version')
  return row.version
}

/** Projects that have an actions schema. */
export async function listProjects(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ project: string }>('SELECT DISTINCT project FROM actions_schema ORDER BY project')
  return rows.map(r => r.project)
}

/** Removes every version of a project's actions schema; returns how many were removed. */
export async function deleteSchema(db: Queryable, project: string): Promise<number> {
  const { rowCount } = await db.query('DELETE FROM actions_schema WHERE project = $1', [project])
  return rowCount ?? 0
}
