// Who may run which operation (upstream's ActionsPermissionsFactory, with a viewer role added): the
// route only checked that the caller may view the project; each resolver asks here.
import { userError } from './user-error.js'
import type { Deps } from '../../deps.js'
import type { AnswerBudget } from './budget.js'
import type { Principal, Role } from '../types.js'

/** What every resolver gets: the deps, the caller, the project of the URL, and the bytes the answer may still take. */
export type GraphqlContext = { deps: Deps; principal: Principal; project: string; budget: AnswerBudget }

/** A root field's resolver: graphql-js calls it with the field's arguments and the context. */
export type Resolver = (args: unknown, ctx: GraphqlContext) => Promise<unknown>

/** What an operation does, as upstream's authorization actions name it. */
export type Action = 'events.view' | 'events.retry' | 'events.stop' | 'events.process' | 'variables.view' | 'variables.set'

const GRANTS: Record<Role, ReadonlySet<Action>> = {
  admin: new Set(['events.view', 'events.retry', 'events.stop', 'events.process', 'variables.view', 'variables.set']),
  // As upstream: a deployer sets up an environment's variables and reads no events.
  deployer: new Set(['variables.view', 'variables.set']),
  viewer: new Set(['events.view']),
}

/** Whether `principal` may do `action` (a system caller may do everything). */
export function may(principal: Principal, action: Action): boolean {
  return principal.kind === 'system' || GRANTS[principal.role].has(action)
}

/** Throws a FORBIDDEN GraphQL error unless `principal` may do `action`; the field answers null, the others still run. */
export function requireAccess(principal: Principal, action: Action): void {
  if (!may(principal, action)) {
    const role = principal.kind === 'token' ? principal.role : 'system'
    throw userError(`Forbidden: the ${role} role may not ${action.replace('.', ' ')}`, 'FORBIDDEN')
  }
}

/**
 * Variable values go to the project's admin and to system callers only, as upstream shows them to
 * whoever manages the project; every other answer redacts them.
 */
export const seesValues = (principal: Principal): boolean => principal.kind === 'system' || principal.role === 'admin'
