// Per-project admin tokens against a real, migrated Postgres.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createToken, listTokens, revokeToken, tokenPrincipal, TOKEN_PREFIX } from '../../lib/db/tokens.js'
import { ValidationError } from '../../lib/errors.js'
import { freshDatabase, type TestDatabase } from '../helpers/db.js'

let db: TestDatabase
beforeAll(async () => {
  db = await freshDatabase()
})
afterAll(async () => {
  await db.drop()
})

describe('admin tokens', () => {
  it('creates a prefixed token of 32 random bytes that names its project and role', async () => {
    const created = await createToken(db.pool, { project: 'tok-a', role: 'viewer', name: 'ci' })
    expect(created.token.startsWith(TOKEN_PREFIX)).toBe(true)
    const secret = created.token.slice(TOKEN_PREFIX.length)
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(Buffer.from(secret, 'base64url')).toHaveLength(32)
    expect(created).toMatchObject({ project: 'tok-a', role: 'viewer', name: 'ci' })
    expect(created.createdAt).toBeInstanceOf(Date)
    expect(await tokenPrincipal(db.pool, created.token)).toEqual({ kind: 'token', tokenId: created.id, project: 'tok-a', role: 'viewer' })
    const other = await createToken(db.pool, { project: 'tok-a', role: 'viewer' })
    expect(other.token).not.toBe(created.token)
    expect(other.name).toBeNull()
  })

  it('stores only a SHA-256 hash: no column holds the token or its secret part', async () => {
    const created = await createToken(db.pool, { project: 'tok-hash', role: 'admin' })
    const { rows } = await db.pool.query<{ row: string; hash: Buffer }>(
      `SELECT t::text AS row, token_hash AS hash FROM actions_admin_token t WHERE id = $1`,
      [created.id],
    )
    const row = rows[0]
    expect(row?.hash).toHaveLength(32)
    expect(row?.row).not.toContain(created.token.slice(TOKEN_PREFIX.length))
  })

  it('refuses an unknown token, a tampered one and strings not shaped like a token', async () => {
    const created = await createToken(db.pool, { project: 'tok-b', role: 'admin' })
    const last = created.token.at(-1) === 'A' ? 'B' : 'A'
    expect(await tokenPrincipal(db.pool, created.token.slice(0, -1) + last)).toBeUndefined()
    expect(await tokenPrincipal(db.pool, '')).toBeUndefined()
    expect(await tokenPrincipal(db.pool, 'x'.repeat(100_000))).toBeUndefined()
    expect(await tokenPrincipal(db.pool, created.token + 'x')).toBeUndefined()
  })

  it('revokes a token at once, once, and keeps it listed with its revocation time', async () => {
    const created = await createToken(db.pool, { project: 'tok-c', role: 'deployer', name: 'deploys' })
    expect(await tokenPrincipal(db.pool, created.token)).toBeDefined()
    expect(await revokeToken(db.pool, created.id)).toBe(true)
    expect(await tokenPrincipal(db.pool, created.token)).toBeUndefined()
    expect(await revokeToken(db.pool, created.id)).toBe(false)
    expect(await revokeToken(db.pool, '00000000-0000-4000-8000-000000000000')).toBe(false)
    expect(await revokeToken(db.pool, 'not-a-uuid')).toBe(false)
    const [listed] = await listTokens(db.pool, 'tok-c')
    expect(listed).toMatchObject({ id: created.id, project: 'tok-c', role: 'deployer', name: 'deploys' })
    expect(listed?.revokedAt).toBeInstanceOf(Date)
    expect(Object.keys(listed ?? {}).sort()).toEqual(['createdAt', 'id', 'name', 'project', 'revokedAt', 'role'])
  })

  it('lists one project newest first, or every project', async () => {
    const first = await createToken(db.pool, { project: 'tok-d', role: 'viewer' })
    const second = await createToken(db.pool, { project: 'tok-d', role: 'admin' })
    await db.pool.query(`UPDATE actions_admin_token SET created_at = created_at - interval '1 minute' WHERE id = $1`, [first.id])
    expect((await listTokens(db.pool, 'tok-d')).map(t => t.id)).toEqual([second.id, first.id])
    const all = await listTokens(db.pool)
    expect(new Set(all.map(t => t.project))).toEqual(new Set(['tok-a', 'tok-hash', 'tok-b', 'tok-c', 'tok-d']))
  })

  it('refuses a bad role, an empty project and an overlong name with a validation error that quotes neither', async () => {
    const longName = 'n'.repeat(300)
    await expect(createToken(db.pool, { project: '', role: 'viewer' })).rejects.toThrow(ValidationError)
    // A JavaScript caller (the CLI's argv) can pass any string; the role is checked before the database.
    const role: string = 'owner'
    const bad = { project: 'tok-e', role, name: longName }
    const err = await createToken(db.pool, bad as Parameters<typeof createToken>[1]).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ValidationError)
    expect(String(err)).toContain('role')
    expect(String(err)).not.toContain(longName)
    expect(await listTokens(db.pool, 'tok-e')).toEqual([])
  })

  it('the database itself refuses a role outside the three', async () => {
    await expect(
      db.pool.query(`INSERT INTO actions_admin_token (project, role, token_hash) VALUES ('tok-f', 'owner', $1)`, [Buffer.alloc(32)]),
    ).rejects.toThrow(/check constraint/)
  })
})
