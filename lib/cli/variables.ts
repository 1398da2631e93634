import type pg from 'pg'
import { z } from 'zod'
import { variablesJson } from '../shapes.js'
import { listVariableNames } from '../db/variable-names.js'
import { fetchVariables, type VariablesMode } from '../db/variables.js'
import { setProjectVariables } from '../operate/variables.js'
import { printDocument, printLines } from './json.js'
import { parseCommand, UsageError, type Io } from './usage.js'

export const VARIABLES_USAGE = `  variables set <project> NAME=VALUE... [--mode merge|set|append-only-missing]
                                            merge (default): set the given names, keep the others;
                                            set: the given names become all the variables;
                                            append-only-missing: add names not yet set, change none
  variables list <project> [--show-values]  list variable names (values only with --show-values)`

const modeSchema = z.enum(['merge', 'set', 'append-only-missing']) satisfies z.ZodType<VariablesMode>
/** Names the templates can substitute (docs/delivery.md); any other name could never be used. */
const VARIABLE_NAME = /^[A-Za-z0-9_]+$/

/** `actions variables set|list`: a project's variables, values printed only when asked. */
export async function variablesCommand(pool: pg.Pool, args: string[], io: Io): Promise<number> {
  const {
    values,
    positionals: [sub, project, ...pairs],
  } = parseCommand('variables', args, {
    mode: { type: 'string' },
    'show-values': { type: 'boolean' },
  })
  if (!project) throw new UsageError('variables: missing <project>')
  if (sub === 'list') {
    if (values.mode !== undefined || pairs.length) throw new UsageError('variables list: takes only <project> and --show-values')
    return list(pool, project, values['show-values'] === true, io)
  }
  if (sub !== 'set') throw new UsageError(`variables: unknown subcommand "${sub ?? ''}"`)
  if (values['show-values']) throw new UsageError('variables set: --show-values applies to list only')
  const parsedMode = modeSchema.safeParse(values.mode ?? 'merge')
  if (!parsedMode.success) throw new UsageError('--mode: expected merge, set or append-only-missing')
  const mode = parsedMode.data
  const vars = parsePairs(pairs)
  // Upstream's SET with no variables deletes them all; from a command line that is far more likely
  // a forgotten argument than a wish, so it is refused.
  if (pairs.length === 0)
    throw new UsageError(`variables set: no NAME=VALUE given${mode === 'set' ? ' (--mode set would delete every variable)' : ''}`)
  // The CLI's user is the database's operator: an admin, who may move any target.
  await setProjectVariables(pool, { project, vars, mode, setter: 'admin' })
  if (io.json) printDocument(io, { project, mode, set: Object.keys(vars).length })
  else io.out(`set ${Object.keys(vars).length} variable(s) of ${project} (mode ${mode})`)
  return 0
}

async function list(pool: pg.Pool, project: string, showValues: boolean, io: Io): Promise<number> {
  // As the API reads them: names and update times only, the values never leave the database.
  if (io.json && !showValues) {
    printLines(io, variablesJson(await listVariableNames(pool, project)))
    return 0
  }
  const vars = [...(await fetchVariables(pool, project))].sort(([a], [b]) => a.localeCompare(b))
  if (io.json) {
    const values = new Map(vars)
    printLines(
      io,
      variablesJson(await listVariableNames(pool, project)).map(v => ({ ...v, value: values.get(v.name) ?? '' })),
    )
    return 0
  }
  for (const [name, value] of vars) io.out(showValues ? `${name}=${value}` : name)
  return 0
}

function parsePairs(pairs: string[]): Record<string, string> {
  const vars: Record<string, string> = {}
  pairs.forEach((arg, i) => {
    const eq = arg.indexOf('=')
    // The argument may hold a secret: name only its position, never its text.
    if (eq <= 0) throw new UsageError(`variables set: argument ${i + 1} is not NAME=VALUE`)
    if (!VARIABLE_NAME.test(arg.slice(0, eq)))
      throw new UsageError(`variables set: argument ${i + 1}: a NAME has only letters, digits and _`)
    vars[arg.slice(0, eq)] = arg.slice(eq + 1)
  })
  return vars
}
