import { spawn } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { delimiter, join } from 'node:path'
import { freePort } from '../../local/postgres.js'

/** Finds an executable on PATH, trying each name in order. */
export function findBinary(...names: string[]): string | undefined {
  const dirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean)
  for (const name of names) {
    for (const dir of dirs) {
      const candidate = join(dir, name)
      try {
        accessSync(candidate, constants.X_OK)
        return candidate
      } catch {
        // Not here; keep looking.
      }
    }
  }
  return undefined
}

/** Debian ships the binary as `prometheus-pushgateway`; upstream tarballs call it `pushgateway`. */
export function pushgatewayBinary(): string | undefined {
  return findBinary('prometheus-pushgateway', 'pushgateway')
}

export function promtoolBinary(): string | undefined {
  return findBinary('promtool')
}

/**
 * Returns whether the binary is present. When it is not, says so loudly: a silently skipped
 * monitoring test looks exactly like a passing one.
 */
export function requireBinary(name: string, path: string | undefined): boolean {
  if (path) return true
  console.warn(`\n*** SKIPPED: ${name} not installed; CI installs it. Tests needing it did not run. ***\n`)
  return false
}

export interface RunningPushgateway {
  url: string
  stop(): Promise<void>
}

const READY_TIMEOUT_MS = 10_000
const STOP_TIMEOUT_MS = 5_000

/** Starts a throwaway in-memory Pushgateway on 127.0.0.1 and resolves once it reports ready. */
export async function startPushgateway(): Promise<RunningPushgateway> {
  const binary = pushgatewayBinary()
  if (!binary) throw new Error('prometheus-pushgateway is not installed (looked for prometheus-pushgateway and pushgateway on PATH)')
  const port = await freePort()
  if (!port) throw new Error('could not find a free port for prometheus-pushgateway')
  const url = `http://127.0.0.1:${port}`
  const child = spawn(
    binary,
    [
      `--web.listen-address=127.0.0.1:${port}`,
      // Debian's build defaults to a persistence file under /var/lib; an empty value keeps tests in memory.
      '--persistence.file=',
      '--web.enable-admin-api',
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )

  let stderr = ''
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk
  })
  const exited = new Promise<void>(resolve => child.once('exit', () => resolve()))
  let hasExited = false
  void exited.then(() => {
    hasExited = true
  })

  const stop = async () => {
    if (hasExited) return
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS)
    await exited
    clearTimeout(timer)
  }

  const deadline = Date.now() + READY_TIMEOUT_MS
  while (Date.now() < deadline) {
    if (hasExited) throw new Error(`prometheus-pushgateway exited before becoming ready (exit ${child.exitCode}):\n${stderr}`)
    if (await isReady(url)) return { url, stop }
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  await stop()
  throw new Error(`prometheus-pushgateway did not answer 200 on ${url}/-/ready within ${READY_TIMEOUT_MS} ms:\n${stderr}`)
}

async function isReady(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1_000) })
    await res.body?.cancel()
    return res.status === 200
  } catch {
    // Connection refused until the listener is up.
    return false
  }
}

/** Reads the Pushgateway's exposition, as Prometheus would scrape it. */
export async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`)
  const text = await res.text()
  if (!res.ok) throw new Error(`GET ${url}/metrics answered ${res.status}: ${text}`)
  return text
}
