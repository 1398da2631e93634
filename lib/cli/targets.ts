import { getCurrentSchema } from '../db/schemas.js'
import { listTargetHealth, pauseLabel, pauseTarget, resumeTarget, type TargetHealth } from '../db/pauses.js'
import type { EventsContext } from './usage.js'
import { oneLine } from './events.js'
import { parseCommand, UsageError, type Io } from './usage.js'
import { wake } from './wake.js'

export const TARGETS_USAGE = `  targets list <project>                    every target of the current schema: running (with its run
                                            of failed batches, if any) or paused (reason, since, next probe)
  targets pause <project> <target>          pause a target (reason operator, no probe): its events wait
  targets resume <project> <target>         clear the pause and the failure run, then wake the project`

/** Characters of a target or project name printed: names come from stored schemas, any length. */
const NAME_CHARS = 100

/** `actions targets …`: the circuit breaker as an operator sees and forces it. */
export async function targetsCommand(ctx: EventsContext, args: string[], io: Io): Promise<number> {
  const { positionals: [sub, project, target, extra] } = parseCommand('targets', args, {})
  if (!project) throw new UsageError(`targets ${sub ?? ''}: missing <project>`)
  if (sub === 'list') {
    if (target !== undefined) throw new UsageError('targets list: takes only <project>')
    return list(ctx, project, io)
  }
  if (sub !== 'pause' && sub !== 'resume') throw new UsageError(`targets: unknown subcommand "${sub ?? ''}"`)
  if (!target) throw new UsageError(`targets ${sub}: missing <target>`)
  if (extra !== undefined) throw new UsageError(`targets ${sub}: unexpected argument 4`)
  const names = await schemaTargets(ctx, project)
  const shown = `${name(target)} of ${name(project)}`
  if (sub === 'pause') {
    if (!names.has(target)) throw new Error(`unknown target "${name(target)}" in project "${name(project)}"`)
    const since = await pauseTarget(ctx.pool, project, target)
    io.out(`target ${shown} paused (operator) since ${since.toISOString()}; its events wait until "targets resume"`)
    return 0
  }
  // A target no longer in the schema may still have a row (paused before it was removed): clearing it is allowed.
  const was = await resumeTarget(ctx.pool, project, target)
  if (!was && !names.has(target)) throw new Error(`unknown target "${name(target)}" in project "${name(project)}"`)
  io.out(was?.paused_reason ? `target ${shown} resumed (was ${state(was)})` : `target ${shown} was not paused${was ? '; its failure run is cleared' : ''}`)
  return wake(ctx.signals(), project, io, 'resume', 'events')
}

async function list(ctx: EventsContext, project: string, io: Io): Promise<number> {
  const names = await schemaTargets(ctx, project)
  const health = new Map((await listTargetHealth(ctx.pool, project)).map(h => [h.target, h]))
  let paused = 0
  for (const target of [...new Set([...names, ...health.keys()])].sort()) {
    const h = health.get(target)
    if (h?.paused_reason) paused++
    io.out(`${name(target)} ${h ? state(h) : 'running'}${names.has(target) ? '' : ' [not in the current schema]'}`)
  }
  io.out(`${names.size} target(s), ${paused} paused`)
  return 0
}

/** The targets of the project's current schema; an unknown project is an error (exit 1). */
async function schemaTargets(ctx: EventsContext, project: string): Promise<Set<string>> {
  const current = await getCurrentSchema(ctx.pool, project)
  if (!current) throw new Error(`unknown project "${name(project)}"`)
  return new Set(Object.keys(current.schema.targets))
}

/** One line of state: paused (reason, since, next probe) or running (and the failure run, if any). */
function state(h: TargetHealth): string {
  const run = h.consecutive_failures > 0 ? `${h.consecutive_failures} failed batch(es) in a row${h.failing_since ? ` since ${h.failing_since.toISOString()}` : ''}` : ''
  if (!h.paused_reason) return run ? `running, failing: ${run}` : 'running'
  const probe = h.probe_at ? `next probe ${h.probe_at.toISOString()}` : 'no probe: waits for "targets resume"'
  return `paused (${oneLine(pauseLabel(h) ?? '?', NAME_CHARS)}) since ${h.paused_at?.toISOString() ?? '?'}, ${probe}${run ? `; ${run}` : ''}`
}

const name = (text: string) => oneLine(text, NAME_CHARS)
