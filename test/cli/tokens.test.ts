// `actions tokens create|list|revoke` against a real database: the token is printed
// once, never listed, never echoed in an error, and a revoked token stops naming a principal at once.
import { describe, expect, it } from 'vitest'
import { tokenPrincipal } from '../../lib/db/tokens.js'
import { MAX_NAME_BYTES } from '../../lib/schema/limits.js'
import { runCli } from '../helpers/cli.js'
import { useDatabase } from '../helpers/harness.js'

const db = useDatabase()
const run = (...argv: string[]) => runCli({ DATABASE_URL: db.url }, argv)
const lines = (text: string) => text.split('\n').filter(l => l !== '')

describe('tokens create, list and revoke', () => {
  it('prints the token once, lists it without the secret or its hash, revokes it and lists it revoked', async () => {
    const created = await run('tokens', 'create', 'shop', '--role', 'deployer', '--name', 'ci')
    expect(created).toMatchObject({ code: 0, err: '' })
    const [head, token] = created.out.split('\n')
    expect(head).toMatch(/^token [0-9a-f-]{36} \(deployer\) of project shop created; it is shown only this once:$/)
    expect(token).toMatch(/^actions_[A-Za-z0-9_-]{43}$/)
    const id = head?.split(' ')[1] ?? ''
    expect(await tokenPrincipal(db.pool, token ?? '')).toEqual({ kind: 'token', tokenId: id, project: 'shop', role: 'deployer' })
    const { rows } = await db.pool.query<{ hash: string }>(
      "SELECT encode(token_hash, 'hex') AS hash FROM actions_admin_token WHERE id = $1",
      [id],
    )
    const hash = rows[0]?.hash ?? 'missing'

    const listed = await run('tokens', 'list', 'shop')
    expect(listed.code).toBe(0)
    expect(lines(listed.out)).toEqual([
      expect.stringMatching(new RegExp(`^${id} project=shop role=deployer name=ci created=\\S+Z live$`)),
      '1 token(s), 1 live',
    ])
    for (const text of [listed.out, listed.err]) {
      expect(text).not.toContain(token)
      expect(text.toLowerCase()).not.toContain(hash)
    }

    expect(await run('tokens', 'revoke', id)).toMatchObject({ code: 0, out: `token ${id} revoked` })
    expect(await tokenPrincipal(db.pool, token ?? '')).toBeUndefined()
    expect(lines((await run('tokens', 'list', 'shop')).out)).toEqual([
      expect.stringMatching(new RegExp(`^${id} .* revoked=\\S+Z$`)),
      '1 token(s), 0 live',
    ])
    // A second revoke finds no live token: a failure (exit 1), not a usage error.
    const again = await run('tokens', 'revoke', id)
    expect(again.code).toBe(1)
    expect(again.err).toContain(`no live token ${id}`)
  })

  it('prints JSON documents with --json: the token once on create, NDJSON on list without secret, a document on revoke', async () => {
    const created = await run('tokens', 'create', 'json-shop', '--role', 'viewer', '--json')
    expect(created.code).toBe(0)
    expect(lines(created.out)).toHaveLength(1)
    const doc = JSON.parse(created.out)
    expect(doc).toEqual({
      id: expect.any(String),
      token: expect.stringMatching(/^actions_/),
      project: 'json-shop',
      role: 'viewer',
      name: null,
      createdAt: expect.any(String),
    })
    expect(new Date(doc.createdAt).toISOString()).toBe(doc.createdAt)
    await run('tokens', 'create', 'json-shop', '--role', 'admin', '--name', 'ops')
    await run('tokens', 'create', 'other', '--role', 'admin')

    const listed = await run('tokens', 'list', 'json-shop', '--json')
    const docs = lines(listed.out).map(l => JSON.parse(l))
    expect(docs).toHaveLength(2)
    expect(listed.out).not.toContain(doc.token)
    for (const d of docs) expect(Object.keys(d).sort()).toEqual(['createdAt', 'id', 'name', 'project', 'revokedAt', 'role'])
    expect(docs.map(d => d.role).sort()).toEqual(['admin', 'viewer'])
    // Without a project every project's tokens are listed.
    const everyProject = lines((await run('tokens', 'list', '--json')).out).map(l => JSON.parse(l).project)
    expect(everyProject.filter(p => p !== 'shop').sort()).toEqual(['json-shop', 'json-shop', 'other'])

    expect(JSON.parse((await run('tokens', 'revoke', doc.id, '--json')).out)).toEqual({ id: doc.id, revoked: true })
    const after = lines((await run('tokens', 'list', 'json-shop', '--json')).out).map(l => JSON.parse(l))
    expect(after.find(d => d.id === doc.id)?.revokedAt).toEqual(expect.any(String))
  })

  it('refuses a bad role, an unusable project or name, and a token given where its id belongs, without echoing it (exit 2)', async () => {
    const secretish = 'actions_' + 'S'.repeat(43)
    const long = 'p'.repeat(MAX_NAME_BYTES + 1)
    const cases: Array<[string[], RegExp]> = [
      [['tokens', 'create', 'shop', '--role', 'owner'], /--role: expected admin, deployer or viewer/],
      [['tokens', 'create', 'shop'], /--role: expected admin, deployer or viewer/],
      [
        ['tokens', 'create', long, '--role', 'admin'],
        new RegExp(`project: ${MAX_NAME_BYTES + 1} bytes, expected a name of at most ${MAX_NAME_BYTES} bytes`),
      ],
      [['tokens', 'create', 'shop', '--role', 'admin', '--name', ''], /--name: expected a non-empty name/],
      [['tokens', 'create', '--role', 'admin'], /missing <project>/],
      [['tokens', 'list', long], /project: 256 bytes/],
      [['tokens', 'list', '--role', 'admin'], /--role and --name apply to create only/],
      [['tokens', 'revoke', secretish], /expected a token id \(uuid/],
      [['tokens', 'revoke'], /missing <id>/],
      [['tokens', 'rotate', 'x'], /unknown subcommand "rotate"/],
    ]
    for (const [argv, message] of cases) {
      const res = await run(...argv)
      expect(res.code, argv.join(' ')).toBe(2)
      expect(res.err, argv.join(' ')).toMatch(message)
      expect(res.err).not.toContain(secretish)
      expect(res.err).not.toContain(long)
    }
    const { rows } = await db.pool.query(
      "SELECT count(*)::int AS n FROM actions_admin_token WHERE project IN ('shop', $1) AND role <> 'deployer'",
      [long],
    )
    expect(rows[0]?.n).toBe(0)
  })
})
