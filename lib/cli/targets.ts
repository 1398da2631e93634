import { targetJson } from '../shapes.js'
import { configSchema, loadConfig, loadConfigPart } from '../config.js'
import { readTargetBacklog } from '../db/admin-events.js'
import { readTargetOutcomes } from '../db/admin-recent.js'
import { getCurrentSchema } from '../db/schemas.js'
import { listTargetHealth, pauseLabel, pauseTarget, resumeTarget, type TargetHealth } from '../db/pauses.js'
import { createDeps } from '../deps.js'
import { formatError } from '../errors.js'
import { createLogger } from '../log.js'
import { emitOps, type OpsEvent } from '../ops.js'
import { oneLine } from './events.js'
import { printDocument, printLines } from './json.js'
import { parseCommand, UsageError, type EventsContext, type Io } from './usage.js'
import { wake } from './wake.js'

export const TARGETS_USAGE = `  targets list <project>                    every target of the current schema: running (with its run
                                            of failed batches, if any) or paused (reason, since, next probe)
  targets pause <project> <target>          pause a target (reason operator, no probe): its events wait
  targets resume <project> <target>         clear the pause and the failure run, then wake the project`

/** Characters of a target or project name printed: names come from stored schemas, any length. */
const NAME_CHARS = 100

/** What the target commands need: the event commands' context, and the environment OPS_PROJECT is read from. */
export type TargetsContext = EventsContext & { env: NodeJS.ProcessEnv }

/** `actions targets …`: the circuit breaker as an operator sees and forces it. */
export async function targetsCommand(ctx: TargetsContext, args: string[], io: Io): Promise<number> {
  const {
    positionals: [sub, project, target, extra],
  } = parseCommand('targets', args, {})
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
    if (io.json) printDocument(io, { project, target, state: 'paused', since: since.toISOString() })
    else io.out(`target ${shown} paused (operator) since ${since.toISOString()}; its events wait until "targets resume"`)
    return tellOps(ctx, { kind: 'target.paused', project, target }, 'pause', io)
  }
  // A target no longer in the schema may still have a row (paused before it was removed): clearing it is allowed.
  const was = await resumeTarget(ctx.pool, project, target)
  if (!was && !names.has(target)) throw new Error(`unknown target "${name(target)}" in project "${name(project)}"`)
  if (io.json) printDocument(io, { project, target, state: 'running', wasPaused: Boolean(was?.paused_reason) })
  else
    io.out(
      was?.paused_reason
        ? `target ${shown} resumed (was ${state(was)})`
        : `target ${shown} was not paused${was ? '; its failure run is cleared' : ''}`,
    )
  // As the engine does, only a pause that ended is news.
  const told = was?.paused_reason ? await tellOps(ctx, { kind: 'target.resumed', project, target }, 'resume', io) : 0
  return Math.max(told, await wake(ctx.signals(), project, io, 'resume', 'events'))
}

/**
 * Tells OPS_PROJECT of an operator's pause or resume as the engine tells it of the breaker's: with
 * lib/ops.ts on the functions' own configuration and enqueue, which signals OPS_PROJECT. Nothing
 * without OPS_PROJECT. The change stands whatever happens here; returns 1 when the event or its signal failed.
 */
async function tellOps(ctx: TargetsContext, event: OpsEvent, change: string, io: Io): Promise<number> {
  let failed = false
  const fail = (why: string) => {
    failed = true
    io.err(`the ${change} stands, but telling OPS_PROJECT (${event.kind}) failed: ${why}`)
  }
  try {
    if (!loadConfigPart(configSchema.pick({ OPS_PROJECT: true }), ctx.env).OPS_PROJECT) return 0
    const signals = ctx.signals()
    // emitOps never throws: what it could not do, it logs, and that line is this command's error.
    const log = createLogger('error', fail)
    const deps = createDeps(loadConfig(ctx.env), { db: ctx.pool, log, ...(signals ? { signals } : {}) })
    await emitOps(deps, [event]).finally(() => deps.http.close())
  } catch (e) {
    fail(formatError(e))
  }
  return failed ? 1 : 0
}

async function list(ctx: EventsContext, project: string, io: Io): Promise<number> {
  const names = await schemaTargets(ctx, project)
  const health = new Map((await listTargetHealth(ctx.pool, project)).map(h => [h.target, h]))
  const targets = [...new Set([...names, ...health.keys()])].sort()
  if (io.json) {
    const backlog = await readTargetBacklog(ctx.pool, project)
    const recent = await readTargetOutcomes(ctx.pool, project)
    printLines(
      io,
      targets.map(t => targetJson(t, names.has(t), health.get(t), backlog.get(t), recent.byTarget.get(t))),
    )
    return 0
  }
  let paused = 0
  for (const target of targets) {
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
  const run =
    h.consecutive_failures > 0
      ? `${h.consecutive_failures} failed batch(es) in a row${h.failing_since ? ` since ${h.failing_since.toISOString()}` : ''}`
      : ''
  if (!h.paused_reason) return run ? `running, failing: ${run}` : 'running'
  const probe = h.probe_at ? `next probe ${h.probe_at.toISOString()}` : 'no probe: waits for "targets resume"'
  return `paused (${oneLine(pauseLabel(h) ?? '?', NAME_CHARS)}) since ${h.paused_at?.toISOString() ?? '?'}, ${probe}${run ? `; ${run}` : ''}`
}

const name = (text: string) => oneLine(text, NAME_CHARS)
