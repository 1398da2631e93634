import type { ActionsSchema, SchemaParseOptions } from '../schema/actions.js'
import { parseActionsSchema, parseStoredActionsSchema } from '../schema/actions.js'
import type { Queryable } from './pool.js'
import { assertNames } from '../schema/limits.js'

export type StoredSchema = { version: number; schema: ActionsSchema }

/**
 * Parsed stored schemas by their stored text. Every drain and every enqueue reads the current schema,
 * and validating it again each time cost more than reading it (under load, a few percent of a dispatch
 * environment's CPU; 25-50 ms an enqueue for a 5,000-trigger schema); the text read is the key, so a
 * changed schema (or one stored again under a reused version number) is parsed afresh. Any schema is
 * kept (`schema set` bounds them by MAX_SCHEMA_BYTES), so enqueue never parses one per call, and the
 * fan-out index built for a cached schema (lib/enqueue/fanout.ts) lives as long as it does.
 */
const parsedSchemas = new Map<string, ActionsSchema>()
/** Entries at most: the projects one environment serves in turn. */
const PARSED_SCHEMAS_MAX = 16
/**
 * Stored text kept at most, in characters, the least recently used evicted first. A parsed schema took
 * about 2.7 times its text in heap (2.8 MiB of 5,000 targets and 5,000 triggers: 7.5 MiB), so with the
 * keys (one byte a character for ASCII) this is about 120 MB at worst, beside a 6 MB request in the
 * 256 MB enqueue function; it holds three schemas at MAX_SCHEMA_BYTES (stored text is a little longer
 * than the JSON they were measured as).
 */
const PARSED_SCHEMAS_MAX_CHARS = 32 * 1024 * 1024
let parsedSchemaChars = 0

function parsedStoredSchema(text: string): ActionsSchema {
  const hit = parsedSchemas.get(text)
  if (hit) {
    // Most recently used last, so the oldest is evicted first.
    parsedSchemas.delete(text)
    parsedSchemas.set(text, hit)
    return hit
  }
  const schema = deepFreeze(parseStoredActionsSchema(JSON.parse(text)))
  // Only a schema stored before MAX_SCHEMA_BYTES existed can be longer than the whole cache.
  if (text.length <= PARSED_SCHEMAS_MAX_CHARS) {
    parsedSchemas.set(text, schema)
    parsedSchemaChars += text.length
    for (const oldest of parsedSchemas.keys()) {
      if (parsedSchemas.size <= PARSED_SCHEMAS_MAX && parsedSchemaChars <= PARSED_SCHEMAS_MAX_CHARS) break
      parsedSchemas.delete(oldest)
      parsedSchemaChars -= oldest.length
    }
  }
  return schema
}

// Shared between callers, so nobody may change it.
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const v of Object.values(value)) deepFreeze(v)
  }
  return value
}

/** $1 project: its current (highest) schema version, one row or none. */
const LATEST_SCHEMA = 'SELECT version, schema FROM actions_schema WHERE project = $1 ORDER BY version DESC LIMIT 1'

/** The project's current actions schema (highest version), or undefined for an unknown project. */
export async function getCurrentSchema(db: Queryable, project: string): Promise<StoredSchema | undefined> {
  const { rows } = await db.query<{ version: number; schema: string }>({
    // Prepared once per connection: read by every enqueue (drains read it with the variables, below).
    name: 'actions_current_schema',
    text: `SELECT version, schema::text AS schema FROM (${LATEST_SCHEMA}) s`,
    values: [project],
  })
  const row = rows[0]
  // Shape only: a version stored before a bound existed must not stop its project (dispatch holds such targets back).
  return row && { version: row.version, schema: parsedStoredSchema(row.schema) }
}

/**
 * What every drain starts from, in one statement: the current schema (as {@link getCurrentSchema})
 * and the project's variables (as fetchVariables in lib/db/variables.ts), read in one snapshot. As
 * two statements they were two of the seven or eight a short drain makes.
 */
export async function getSchemaAndVariables(
  db: Queryable,
  project: string,
): Promise<{ stored: StoredSchema | undefined; variables: Map<string, string> }> {
  const { rows } = await db.query<{ version: number | null; schema: string | null; names: string[] | null; vals: string[] | null }>({
    // Prepared once per connection: read by every drain.
    name: 'actions_drain_start',
    // One pass over the variables, both arrays in name order: they pair up (null when there are none).
    text: `SELECT s.version, s.schema::text AS schema, v.names, v.vals
      FROM (SELECT array_agg(name ORDER BY name) AS names, array_agg(value ORDER BY name) AS vals
            FROM actions_variable WHERE project = $1) v
      LEFT JOIN LATERAL (${LATEST_SCHEMA}) s ON true`,
    values: [project],
  })
  const row = rows[0]
  // Values are secrets: never logged.
  const variables = new Map((row?.names ?? []).map((name, i) => [name, row?.vals?.[i] ?? '']))
  const stored =
    row && row.version !== null && row.schema !== null ? { version: row.version, schema: parsedStoredSchema(row.schema) } : undefined
  return { stored, variables }
}

/**
 * Validates (with the bounds of `opts`, see parseActionsSchema) and stores a new version of the project's
 * actions schema; returns its version number. Stored as `json` text (migration 018), so its keys keep the
 * order they were written in: a target's headers and body template go out in that order.
 */
export async function storeSchema(db: Queryable, project: string, input: unknown, opts: SchemaParseOptions = {}): Promise<number> {
  assertNames('project name', [['project', project]])
  const schema = parseActionsSchema(input, opts)
  const { rows } = await db.query<{ version: number }>(
    `INSERT INTO actions_schema (project, version, schema)
     SELECT $1, coalesce(max(version), 0) + 1, $2::json FROM actions_schema WHERE project = $1
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
