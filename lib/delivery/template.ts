import type { EventRow } from '../db/events.js'
import type { WebhookTarget } from '../schema/actions.js'

/** A `{{name}}` placeholder naming a project variable. */
const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g

/** Thrown when a template names a variable the project does not define; the message names it, never a value. */
export class UndefinedVariableError extends Error {
  override name = 'UndefinedVariableError'
  constructor(readonly variable: string) {
    super(`Undefined variable ${variable}`)
  }
}

/** Replaces every `{{name}}` with the project variable's value. */
export function substitute(template: string, variables: ReadonlyMap<string, string>): string {
  return template.replace(PLACEHOLDER, (_, name: string) => {
    const value = variables.get(name)
    if (value === undefined) throw new UndefinedVariableError(name)
    return value
  })
}

/** The wire shape of one event in a batch (upstream's `meta` plus the payload). */
export function eventBody(row: EventRow) {
  return {
    meta: {
      eventId: row.id,
      transactionId: row.transaction_id,
      identityId: row.identity_id,
      ipAddress: row.ip_address,
      userAgent: row.user_agent,
      createdAt: row.created_at,
      lastStateChange: row.last_state_change,
      numRetries: row.num_retries,
      trigger: row.trigger,
      target: row.target,
    },
    ...row.payload,
  }
}

/** A deep copy of the target's body template with the events placed at `payloadPath` (default `events`). */
export function requestBody(target: WebhookTarget, events: readonly EventRow[]): Record<string, unknown> {
  // Most targets have no body template; a deep copy per batch is only paid when there is one.
  const body: Record<string, unknown> = target.body ? structuredClone(target.body) : {}
  const path = target.payloadPath ?? ['events']
  let node = body
  for (const key of path.slice(0, -1)) {
    const next = node[key]
    if (isObject(next)) {
      node = next
    } else {
      const created: Record<string, unknown> = {}
      node[key] = created
      node = created
    }
  }
  node[path[path.length - 1] ?? 'events'] = events.map(eventBody)
  return body
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}
