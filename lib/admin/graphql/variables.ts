// setVariables: upstream's three modes, written as `actions variables set --mode …` writes them.
import { setProjectVariables } from '../../operate/variables.js'
import { ValidationError } from '../../errors.js'
import { requireAccess, seesValues, type Resolver } from './access.js'
import { userError } from './user-error.js'
import { parseArgs, setVariablesArgs } from './inputs.js'

/**
 * Writes the given variables in one transaction. A name given twice keeps its last value, as
 * upstream's input map does. SET with an empty list deletes every variable, as upstream does: a
 * document states that list on purpose (the CLI refuses it, where it is more likely a forgotten argument).
 */
export const setVariablesResolver: Resolver = async (args, ctx) => {
  requireAccess(ctx.principal, 'variables.set')
  const { variables, mode } = parseArgs(setVariablesArgs, args)
  // fromEntries defines own properties, so a name like __proto__ is a key, never the prototype.
  const vars = Object.fromEntries(variables.map(v => [v.name, v.value]))
  try {
    const setter = seesValues(ctx.principal) ? 'admin' : 'non-admin'
    await setProjectVariables(ctx.deps.db, { project: ctx.project, vars, mode, setter })
  } catch (e) {
    // Its problems name fields, targets and limits only (lib/schema/limits.ts, lib/operate/variables.ts).
    if (e instanceof ValidationError) throw userError(e.problems.join('; '), 'BAD_USER_INPUT')
    throw e
  }
  ctx.deps.log.info('graphql: variables set', { project: ctx.project, count: variables.length, mode })
  return { ok: true }
}
