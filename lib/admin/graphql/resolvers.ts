// The resolvers of the Actions API, as the root value: each checks the caller's role for its
// operation, validates its arguments with zod, and does what the CLI's matching command does.
import { eventsByIds, getEvent, pageEventSizes, type Listing } from '../../db/operator.js'
import { fetchVariables } from '../../db/variables.js'
import type { EventRow } from '../../events.js'
import { retryOne } from '../../operate/retry.js'
import { shownRedaction } from '../../operate/shown.js'
import { stopOne } from '../../operate/stop.js'
import { wakeProject } from '../../operate/types.js'
import { REDACTED, type Redactor } from '../../text.js'
import { attemptJson } from '../../shapes.js'
import { requireAccess, seesValues, type Action, type GraphqlContext, type Resolver } from './access.js'
import { userError } from './user-error.js'
import { spend } from './budget.js'
import { eventArgs, parseArgs, retryArgs, uuidArg } from './inputs.js'
import { setVariablesResolver } from './variables.js'

/** The Event type's fields: ISO timestamps, the log's text redacted with the project's variables. */
function eventOut(row: EventRow, redact: Redactor) {
  return {
    id: row.id,
    transactionId: row.transaction_id,
    identityId: row.identity_id,
    ipAddress: row.ip_address,
    userAgent: row.user_agent,
    createdAt: row.created_at.toISOString(),
    lastStateChange: row.last_state_change.toISOString(),
    resolvedAt: row.resolved_at?.toISOString() ?? null,
    visibleAt: row.visible_at.toISOString(),
    numRetries: row.num_retries,
    state: row.state,
    stage: row.stage,
    target: row.target,
    payload: row.payload,
    log: row.log.map(entry => attemptJson(entry, redact)),
  }
}

/** The redactor of the project's current secrets: stored text is shown redacted, as REST and the CLI show it (docs/design.md, "Text from outside"). */
const projectRedactor = async (ctx: GraphqlContext) => (await shownRedaction(ctx.deps.db, ctx.project)).redact

function listing(which: Listing): Resolver {
  return async (args, ctx) => {
    requireAccess(ctx.principal, 'events.view')
    const { limit, offset } = parseArgs(eventArgs, args)
    // The page's stored bytes are spent before a payload is read: an answer past its bound reads none.
    const sizes = await pageEventSizes(ctx.deps.db, ctx.project, which, limit, offset)
    spend(
      ctx.budget,
      sizes.reduce((sum, s) => sum + s.bytes, 0),
    )
    const rows = await eventsByIds(
      ctx.deps.db,
      ctx.project,
      sizes.map(s => s.id),
    )
    const redact = await projectRedactor(ctx)
    return rows.map(row => eventOut(row, redact))
  }
}

const event: Resolver = async (args, ctx) => {
  requireAccess(ctx.principal, 'events.view')
  const { id } = parseArgs(uuidArg, args)
  const row = await getEvent(ctx.deps.db, ctx.project, id)
  if (!row) return null
  // One event is bounded (a payload of 256 KiB, a log of maxAttempts entries), but it counts too.
  spend(ctx.budget, Buffer.byteLength(JSON.stringify(row.payload)) + Buffer.byteLength(JSON.stringify(row.log)))
  return eventOut(row, await projectRedactor(ctx))
}

const variables: Resolver = async (_args, ctx) => {
  requireAccess(ctx.principal, 'variables.view')
  const shown = seesValues(ctx.principal)
  const vars = await fetchVariables(ctx.deps.db, ctx.project)
  return [...vars].sort(([a], [b]) => a.localeCompare(b)).map(([name, value]) => ({ name, value: shown ? value : REDACTED }))
}

/**
 * retryEvent: the rule is lib/operate/retry.ts's, as for REST and the CLI. An unknown id is ok: false
 * (upstream's answer); a refusal is a CONFLICT error saying the state and what to do.
 */
const retry: Resolver = async (args, ctx) => {
  requireAccess(ctx.principal, 'events.retry')
  const { id, force } = parseArgs(retryArgs, args)
  const result = await retryOne({ db: ctx.deps.db, signals: ctx.deps.signals }, { project: ctx.project, id, force })
  if (!result.ok) {
    if (result.found) throw userError(`Retry refused: ${result.reason}`, 'CONFLICT')
    return { ok: false }
  }
  if (result.signal.sent === false && result.signal.why === 'failed') warnSignal(ctx, 'events.retry', result.signal.error)
  return { ok: true }
}

/** stopEvent: the rule is lib/operate/stop.ts's; an unknown id is ok: false, a refusal a CONFLICT error. */
const stop: Resolver = async (args, ctx) => {
  requireAccess(ctx.principal, 'events.stop')
  const { id } = parseArgs(uuidArg, args)
  const result = await stopOne({ db: ctx.deps.db, signals: ctx.deps.signals }, { project: ctx.project, id })
  if (!result.ok) {
    if (result.found) throw userError(`Stop refused: ${result.reason}`, 'CONFLICT')
    return { ok: false }
  }
  return { ok: true }
}

/**
 * A signal that could not be sent after a committed change costs only latency (the sweeper re-drives
 * due events within a minute): it is logged by name.
 */
function warnSignal(ctx: GraphqlContext, action: Action, e: unknown): void {
  ctx.deps.log.warn('graphql: signal not sent', { project: ctx.project, action, error: e instanceof Error ? e.name : 'error' })
}

/** Sends the project its signal; false (and logged) when it could not be sent. */
async function wake(ctx: GraphqlContext, action: Action): Promise<boolean> {
  const outcome = await wakeProject(ctx.deps.signals, ctx.project)
  if (outcome.sent === false && outcome.why === 'failed') warnSignal(ctx, action, outcome.error)
  return outcome.sent
}

// Upstream drains one batch in the request; here the signal makes the project's dispatch function do it.
const processBatch: Resolver = async (_args, ctx) => {
  requireAccess(ctx.principal, 'events.process')
  return { ok: await wake(ctx, 'events.process') }
}

/** The root value: upstream's query and mutation fields by name. */
export const rootValue: Record<string, Resolver> = {
  failedEvents: listing('failed'),
  eventsToProcess: listing('due'),
  eventsInProcessing: listing('processing'),
  event,
  variables,
  retryEvent: retry,
  stopEvent: stop,
  setVariables: setVariablesResolver,
  processBatch,
}
