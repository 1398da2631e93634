import { readFile } from 'node:fs/promises'
import type pg from 'pg'
import { configSchema, loadConfigPart } from '../config.js'
import { migrate } from '../db/migrate.js'
import { deleteSchema, getCurrentSchema, storeSchema } from '../db/schemas.js'
import { printDocument } from './json.js'
import { parseCommand, UsageError, type Io } from './usage.js'

export const MIGRATE_USAGE = `  migrate                                   apply pending migrations (reads DATABASE_URL)`

export const SCHEMA_USAGE = `  schema set <project> <file.json>          validate and store a new actions schema version
  schema get <project>                      print the current actions schema
  schema delete <project> --yes             remove the project: its pending events then fail as
                                            unknown target, its heartbeat series goes at the next sweep`

/** `actions migrate`: applies pending migrations; with --json `{ applied: [names] }`. */
export async function migrateCommand(pool: pg.Pool, args: string[], io: Io): Promise<number> {
  if (parseCommand('migrate', args, {}).positionals.length) throw new UsageError('migrate: takes no arguments')
  const applied = await migrate(pool)
  if (io.json) printDocument(io, { applied })
  else io.out(applied.length ? `applied ${applied.join(', ')}` : 'nothing to apply')
  return 0
}

/** `actions schema set|get|delete`: a project's actions schema versions. */
export async function schemaCommand(pool: pg.Pool, env: NodeJS.ProcessEnv, args: string[], io: Io): Promise<number> {
  const {
    values,
    positionals: [sub, project, ...more],
  } = parseCommand('schema', args, { yes: { type: 'boolean' } })
  if (!project) throw new UsageError('schema: missing <project>')
  if (sub === 'set') {
    const file = more[0]
    if (!file) throw new UsageError('schema set: missing <file.json>')
    // The bound dispatch holds targets to (docs/design.md, "Bounds"), read with the config's rule and default.
    const { MAX_TARGET_TIMEOUT_MS } = loadConfigPart(configSchema.pick({ MAX_TARGET_TIMEOUT_MS: true }), env)
    const version = await storeSchema(pool, project, await readJson(file), { maxTimeoutMs: MAX_TARGET_TIMEOUT_MS })
    if (io.json) printDocument(io, { project, version })
    else io.out(`stored version ${version} of the actions schema of ${project}`)
    return 0
  }
  if (sub === 'get') {
    const current = await getCurrentSchema(pool, project)
    if (!current) throw new Error(`unknown project "${project}"`)
    const doc = { version: current.version, schema: current.schema }
    // Today's output is already JSON, indented for a person; --json makes it one line like every document.
    if (io.json) printDocument(io, doc)
    else io.out(JSON.stringify(doc, null, 2))
    return 0
  }
  if (sub === 'delete') {
    if (!values.yes) throw new UsageError('schema delete: pending events of the project will fail; add --yes to confirm')
    const removed = await deleteSchema(pool, project)
    if (removed === 0) throw new Error(`unknown project "${project}"`)
    if (io.json) printDocument(io, { project, removedVersions: removed })
    else io.out(`removed ${removed} version(s) of the actions schema of ${project}`)
    return 0
  }
  throw new UsageError(`schema: unknown subcommand "${sub ?? ''}"`)
}

async function readJson(file: string): Promise<unknown> {
  const text = await readFile(file, 'utf8')
  try {
    return JSON.parse(text)
  } catch (cause) {
    // The parser's message quotes the text around the error, and a schema file holds target URLs.
    throw new Error(`${file} is not valid JSON`, { cause: new SyntaxError(cause instanceof Error ? cause.name : 'unparsable') })
  }
}
