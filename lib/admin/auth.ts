// Who is calling the admin API, and may they. The transport says what it knows of the
// caller (an IAM-signed Function URL request; the local stack's bootstrap token); everything else
// must bring `Authorization: Bearer <token>`, looked up on every request (no cache: a revoked token
// is refused at once). Nothing here logs, and no error it could raise carries a header.
import { createHash, timingSafeEqual } from 'node:crypto'
import type { Queryable } from '../db/pool.js'
import { tokenPrincipal } from '../db/tokens.js'
import type { Need, Principal, Role } from './types.js'

/** What the transport vouches for: `iamSigned` (AWS checked the signature), `systemToken` (the local stack's bootstrap token). */
export type Trust = { iamSigned?: boolean; systemToken?: string }

/**
 * Longest Authorization header read: a token is 51 characters; a header of kilobytes is not ours and
 * is refused before any parsing or hashing.
 */
const MAX_AUTHORIZATION_CHARS = 1024

// RFC 9110's auth-scheme is case-insensitive; RFC 6750's b64token (token68) follows one or more spaces.
const BEARER = /^bearer +([A-Za-z0-9._~+/-]+=*) *$/i

/** The Bearer token of `authorization`, or undefined when there is none or it is not a Bearer credential. */
export function bearerToken(authorization: string | undefined): string | undefined {
  if (authorization === undefined || authorization.length > MAX_AUTHORIZATION_CHARS) return undefined
  return BEARER.exec(authorization)?.[1]
}

/** True when two secrets are equal, in time independent of where they differ (both are hashed to one length first). */
function sameSecret(a: string, b: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest()
  return timingSafeEqual(digest(a), digest(b))
}

/** The caller of a request: system when the transport vouches for it, else the principal of its Bearer token; undefined when neither. */
export async function authenticate(db: Queryable, authorization: string | undefined, trust: Trust): Promise<Principal | undefined> {
  if (trust.iamSigned) return { kind: 'system' }
  const token = bearerToken(authorization)
  if (token === undefined) return undefined
  if (trust.systemToken !== undefined && sameSecret(token, trust.systemToken)) return { kind: 'system' }
  return tokenPrincipal(db, token)
}

// Upstream's project roles: admin may do everything; deployer may view and set variables; viewer may view.
const GRANTS: Record<Role, ReadonlySet<Need>> = {
  admin: new Set<Need>(['view', 'variables', 'admin']),
  deployer: new Set<Need>(['view', 'variables']),
  viewer: new Set<Need>(['view']),
}

/** True when the role may do what `need` names. */
export function roleAllows(role: Role, need: Need): boolean {
  return GRANTS[role].has(need)
}

/**
 * Whether `principal` may do `need` on `project`: system may do anything; a token only on its own
 * project and as its role allows. A route that names no project (`project` undefined) needs only a valid caller.
 */
export function authorize(principal: Principal, need: Need, project: string | undefined): boolean {
  if (principal.kind === 'system' || project === undefined) return true
  return principal.project === project && roleAllows(principal.role, need)
}
