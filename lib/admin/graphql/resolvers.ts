// The resolvers of the Actions API, as the root value: each checks the caller's role for its
// operation, validates its arguments with zod, and does what the CLI's matching command does.
import { getEvent, pageEvents, retryEvent, stopEvent, type Listing } from '../../db/operator.js'
import { fetchVariables } from '../../db/variables.js'
import type { EventRow } from '../../events.js'
import { redactor, REDACTED, type Redactor } from '../../text.js'
import { attemptJson } from '../../shapes.js'
import { requireAccess, seesValues, type Action, type GraphqlContext, type Resolver } from './access.js'
import { eventArgs, parseArgs, uuidArg } from './inputs.js'
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

/** The redactor of the project's current variables: stored text is shown redacted, as the CLI shows it (docs/design.md, "Text from outside"). */
const projectRedactor = async (ctx: GraphqlContext) => redactor((await fetchVariables(ctx.deps.db, ctx.project)).values())

function listing(which: Listing): Resolver {
  return async (args, ctx) => {
    requireAccess(ctx.principal, 'events.view')
    const { limit, offset } = parseArgs(eventArgs, args)
    const rows = await pageEvents(ctx.deps.db, ctx.project, which, limit, offset)
    const redact = await projectRedactor(ctx)
    return rows.map(row => eventOut(row, redact))
  }
}

const event: Resolver = async (args, ctx) => {
  requireAccess(ctx.principal, 'events.view')
  const { id } = parseArgs(uuidArg, args)
  const row = await getEvent(ctx.deps.db, ctx.project, id)
  return row ? eventOut(row, await projectRedactor(ctx)) : null
}

const variables: Resolver = async (_args, ctx) => {
  requireAccess(ctx.principal, 'variables.view')
  const shown = seesValues(ctx.principal)
  const vars = await fetchVariables(ctx.deps.db, ctx.project)
  return [...vars].sort(([a], [b]) => a.localeCompare(b)).map(([name, value]) => ({ name, value: shown ? value : REDACTED }))
}

/** retryEvent and stopEvent: one event of the project; a retry then signals the project once. */
function byId(action: Action, change: typeof retryEvent, signal: boolean): Resolver {
  return async (args, ctx) => {
    requireAccess(ctx.principal, action)
    const { id } = parseArgs(uuidArg, args)
    const changed = await change(ctx.deps.db, ctx.project, id)
    if (changed && signal) await wake(ctx, action)
    return { ok: changed }
  }
}

/**
 * Sends the project its signal. The change is committed first, so a failed send costs only latency
 * (the sweeper re-drives due events within a minute): it is logged by name, and reported as false.
 */
async function wake(ctx: GraphqlContext, action: Action): Promise<boolean> {
  try {
    await ctx.deps.signals.send(ctx.project)
    return true
  } catch (e) {
    ctx.deps.log.warn('graphql: signal not sent', { project: ctx.project, action, error: e instanceof Error ? e.name : 'error' })
    return false
  }
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
  retryEvent: byId('events.retry', retryEvent, true),
  stopEvent: byId('events.stop', stopEvent, false),
  setVariables: setVariablesResolver,
  processBatch,
}
