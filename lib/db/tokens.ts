// Per-project admin tokens: created once and shown once, kept only as a SHA-256 hash
// (migration 013), listed without the secret, revoked by id. A token never reaches a log line or an
// error message: none of these functions puts it, or its hash, into anything they throw.
import { createHash, randomBytes } from 'node:crypto'
import type { Queryable } from './pool.js'
import { ValidationError } from '../errors.js'
import { assertNames, nameProblem } from '../schema/limits.js'

/** A project token's role, as upstream's project roles: admin may do everything, deployer may view and set variables. */
export type Role = 'admin' | 'deployer' | 'viewer'

/**
 * Who is calling. `system`: an IAM-signed caller of the deployed function URL, or the local stack's
 * bootstrap token; it acts on every project. `token`: a per-project token (only its hash is stored).
 */
export type Principal = { kind: 'system' } | { kind: 'token'; tokenId: string; project: string; role: Role }

/** What starts every token: a reader (and a secret scanner) can tell an Actions admin token at a glance. */
export const TOKEN_PREFIX = 'actions_'

/** Random bytes per token: 256 bits, beyond guessing; base64url makes them 43 characters. */
const TOKEN_BYTES = 32

/** The length of every token this module makes; anything else is refused without a query. */
const TOKEN_LENGTH = TOKEN_PREFIX.length + Math.ceil((TOKEN_BYTES * 4) / 3)

const ROLES: ReadonlySet<string> = new Set<Role>(['admin', 'deployer', 'viewer'])

/** A token as `tokens create` shows it, once: the only time the secret exists outside its holder. */
export type CreatedToken = { id: string; token: string; project: string; role: Role; name: string | null; createdAt: Date }

/** A token as `tokens list` shows it: never the secret, never its hash. */
export type TokenInfo = { id: string; project: string; role: Role; name: string | null; createdAt: Date; revokedAt: Date | null }

type TokenRow = { id: string; project: string; role: Role; name: string | null; created_at: Date; revoked_at: Date | null }

function hashOf(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest()
}

/** True when `value` is a role a token may have. */
export function isRole(value: string): value is Role {
  return ROLES.has(value)
}

/** Creates a token for `project` with `role`; the answer holds the token itself, which is never stored. */
export async function createToken(db: Queryable, input: { project: string; role: Role; name?: string }): Promise<CreatedToken> {
  assertNames('token', [['project', input.project]])
  const problems: string[] = []
  if (!isRole(input.role)) problems.push('role: expected admin, deployer or viewer')
  const nameIssue = input.name === undefined ? undefined : nameProblem('name', input.name)
  if (nameIssue) problems.push(nameIssue)
  if (problems.length) throw new ValidationError('token', problems)

  const token = TOKEN_PREFIX + randomBytes(TOKEN_BYTES).toString('base64url')
  const { rows } = await db.query<{ id: string; created_at: Date }>(
    `INSERT INTO actions_admin_token (project, role, name, token_hash) VALUES ($1, $2, $3, $4) RETURNING id, created_at`,
    [input.project, input.role, input.name ?? null, hashOf(token)],
  )
  const row = rows[0]
  if (!row) throw new Error('creating the token returned no row')
  return { id: row.id, token, project: input.project, role: input.role, name: input.name ?? null, createdAt: row.created_at }
}

/** Every token (of `project` when given), newest first, revoked ones included. */
export async function listTokens(db: Queryable, project?: string): Promise<TokenInfo[]> {
  const { rows } = await db.query<TokenRow>(
    `SELECT id, project, role, name, created_at, revoked_at FROM actions_admin_token
     WHERE $1::text IS NULL OR project = $1 ORDER BY created_at DESC, id`,
    [project ?? null],
  )
  return rows.map(r => ({ id: r.id, project: r.project, role: r.role, name: r.name, createdAt: r.created_at, revokedAt: r.revoked_at }))
}

// A uuid's text form; anything else cannot name a token, and Postgres would refuse the cast with an error.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Revokes the token `id`: true when it was live and is now revoked, false when unknown or already revoked. */
export async function revokeToken(db: Queryable, id: string): Promise<boolean> {
  if (!UUID.test(id)) return false
  const { rowCount } = await db.query(`UPDATE actions_admin_token SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL`, [id])
  return (rowCount ?? 0) > 0
}

/**
 * Who `token` is, read from the table on every call (no cache, so a revoked token is refused at once);
 * undefined when it is unknown, revoked, or not shaped like a token at all.
 */
export async function tokenPrincipal(db: Queryable, token: string): Promise<Principal | undefined> {
  if (token.length !== TOKEN_LENGTH || !token.startsWith(TOKEN_PREFIX)) return undefined
  const { rows } = await db.query<{ id: string; project: string; role: Role }>(
    `SELECT id, project, role FROM actions_admin_token WHERE token_hash = $1 AND revoked_at IS NULL`,
    [hashOf(token)],
  )
  const row = rows[0]
  return row ? { kind: 'token', tokenId: row.id, project: row.project, role: row.role } : undefined
}
