import { X509Certificate } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../lib/config.js'
import { createPool, type PoolSettings } from '../../lib/db/pool.js'
import { RDS_CA_BUNDLE } from '../../vendor/rds-ca-bundle.js'
import { closeDeps, createDeps } from '../../lib/deps.js'
import { errorCode, formatError } from '../../lib/errors.js'
import { runCli } from '../helpers/cli.js'
import { haveOpenssl, startTlsPostgres, type TlsPostgres } from '../helpers/tls.js'

// Trust auth ignores it; it is here so the tests can show no error carries it.
const PASSWORD = 'tls-test-s3cret'
const ready = haveOpenssl()
let server: TlsPostgres

beforeAll(async () => {
  if (ready) server = await startTlsPostgres()
})
afterAll(async () => {
  await server?.stop()
})

const url = (host: string, query = '') => `postgres://postgres:${PASSWORD}@${host}:${server.port}/postgres${query}`

/** Whether this connection is encrypted, as the server sees it; rejects with the connection's error. */
async function usesTls(connectionString: string, settings: PoolSettings): Promise<boolean> {
  const pool = createPool(connectionString, 1, settings)
  try {
    const { rows } = await pool.query<{ ssl: boolean }>('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()')
    return rows[0]?.ssl ?? false
  } finally {
    await pool.end()
  }
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('connected, but should not have')
    },
    (e: unknown) => e,
  )

/** No part of what an operator sees of the error names the URL or its password. */
function expectNoSecrets(e: unknown) {
  const seen = [formatError(e), String(e), e instanceof Error ? (e.stack ?? '') : ''].join('\n')
  expect(seen).not.toContain(PASSWORD)
  expect(seen).not.toContain('postgres://')
}

describe.runIf(ready)('DATABASE_CA: TLS with verify-full against a cluster whose certificate names only localhost', () => {
  it('connects over TLS with the CA that issued the certificate', async () => {
    expect(await usesTls(url('localhost'), { ca: server.caFile })).toBe(true)
  })

  it('uses TLS and verifies whatever the URL says: sslmode=disable or no-verify change nothing', async () => {
    expect(await usesTls(url('localhost', '?sslmode=disable'), { ca: server.caFile })).toBe(true)
    const e = await failure(usesTls(url('localhost', '?sslmode=no-verify'), { ca: server.otherCaFile }))
    expect(errorCode(e)).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE')
  })

  it('fails without it, as a URL with sslmode=verify-full does on a CA Node does not know', async () => {
    const e = await failure(usesTls(url('localhost', '?sslmode=verify-full'), {}))
    expect(errorCode(e)).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE')
    expect(formatError(e)).toMatch(/unable to verify the first certificate/)
    expectNoSecrets(e)
  })

  it('fails with a CA that did not issue the certificate', async () => {
    const e = await failure(usesTls(url('localhost'), { ca: server.otherCaFile }))
    expect(errorCode(e)).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE')
    expectNoSecrets(e)
  })

  it('fails when the host connected to is not a name in the certificate (127.0.0.1 for a localhost certificate)', async () => {
    const e = await failure(usesTls(url('127.0.0.1'), { ca: server.caFile }))
    expect(errorCode(e)).toBe('ERR_TLS_CERT_ALTNAME_INVALID')
    expect(formatError(e)).toMatch(/IP: 127\.0\.0\.1 is not in the cert's list/)
    expectNoSecrets(e)
  })

  it('with rds, trusts the shipped Amazon RDS bundle instead of the CA here, so the test cluster does not verify', async () => {
    const e = await failure(usesTls(url('localhost'), { ca: 'rds' }))
    expect(errorCode(e)).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE')
  })

  it('applies to the functions (createDeps) with prepared statements on or off', async () => {
    for (const prepared of ['true', 'false']) {
      const deps = createDeps(
        loadConfig({
          DATABASE_URL: url('localhost'),
          SIGNAL_QUEUE_URL: 'http://127.0.0.1:9/q',
          DATABASE_CA: server.caFile,
          DB_PREPARED_STATEMENTS: prepared,
        }),
      )
      try {
        expect((await deps.db.query<{ ssl: boolean }>('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()')).rows[0]?.ssl).toBe(true)
      } finally {
        await closeDeps(deps)
      }
    }
  })

  it('cuts a stuck statement with the switch off: the cancel request reaches a server that takes TLS', async () => {
    const deps = createDeps(
      loadConfig({
        DATABASE_URL: url('localhost'),
        SIGNAL_QUEUE_URL: 'http://127.0.0.1:9/q',
        DATABASE_CA: server.caFile,
        DB_PREPARED_STATEMENTS: 'false',
        DB_STATEMENT_TIMEOUT_MS: '300',
      }),
    )
    try {
      expect(errorCode(await failure(deps.db.query('SELECT pg_sleep(5)')))).toBe('57014')
    } finally {
      await closeDeps(deps)
    }
  })

  it('applies to the CLI (migrate), which fails cleanly without it', async () => {
    expect(await runCli({ DATABASE_URL: url('localhost'), DATABASE_CA: server.caFile }, ['migrate'])).toMatchObject({ code: 0 })
    const without = await runCli({ DATABASE_URL: url('localhost', '?sslmode=verify-full') }, ['migrate'])
    expect(without.code).toBe(1)
    expect(without.err).toMatch(/unable to verify the first certificate/)
    expect(without.err).not.toContain(PASSWORD)
    const missing = await runCli({ DATABASE_URL: url('localhost'), DATABASE_CA: '/nonexistent/ca.pem' }, ['migrate'])
    expect(missing).toMatchObject({
      code: 2,
      err: expect.stringMatching(/DATABASE_CA: cannot read the CA file \/nonexistent\/ca\.pem \(ENOENT\)/),
    })
  })
})

describe('the shipped RDS CA bundle', () => {
  it('is 120 certificates that all parse, Amazon RDS regional CAs and the Amazon roots RDS Proxy uses', () => {
    const pems = RDS_CA_BUNDLE.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []
    expect(pems).toHaveLength(120)
    const subjects = pems.map(pem => new X509Certificate(pem).subject)
    expect(subjects.filter(s => s.includes('CN=Amazon RDS')).length).toBe(115)
    expect(subjects).toContain('C=US\nO=Amazon\nCN=Amazon Root CA 1')
    expect(subjects.some(s => s.includes('CN=Amazon RDS us-east-1 Root CA RSA2048 G1'))).toBe(true)
  })
})
