import { spawn } from 'node:child_process'
import { Socket } from 'node:net'
import { stopGuard } from '../../local/postgres.js'

/**
 * Runs the server under a small shell that also watches its own stdin (kept as fd 3: a background
 * job's stdin is /dev/null): when the pipe closes, which happens when we stop it and also when this
 * process dies in any way (even SIGKILL), it sends the server `sig`. The shell exits with the
 * server, so a server that fails at start is seen at once.
 */
const GUARD = [
  'exec 3<&0',
  'bin="$1"; sig="$2"; shift 2',
  '"$bin" "$@" </dev/null & pid=$!',
  '(read _ <&3; kill -"$sig" "$pid" 2>/dev/null) & reader=$!',
  'wait "$pid"; status=$?',
  'kill "$reader" 2>/dev/null',
  'exit "$status"',
].join('\n')

const STOP_TIMEOUT_MS = 10_000

export type Guarded = {
  /** Everything the server writes to stderr, as it comes. */
  onStderr(listener: (text: string) => void): void
  /** Resolves when the server (and so its guard) has exited; `code` is the server's exit status. */
  readonly exited: Promise<{ code: number | null }>
  /** Whether the server is still running. */
  running(): boolean
  /** Stops the server with the guard's signal, then kills the group after a bounded wait. */
  stop(): Promise<void>
}

/** Starts `binary` under the guard, as `ids` (uid and gid) when given; no server outlives this process. */
export function spawnGuarded(
  binary: string,
  args: string[],
  sig: 'TERM' | 'INT',
  ids?: { uid: number; gid: number },
  env?: NodeJS.ProcessEnv,
): Guarded {
  const guard = spawn('/bin/sh', ['-c', GUARD, 'guard', binary, sig, ...args], {
    detached: true,
    stdio: ['pipe', 'ignore', 'pipe'],
    ...(ids ?? {}),
    ...(env ? { env } : {}),
  })
  let done = false
  const exited = new Promise<{ code: number | null }>(resolve =>
    guard.once('exit', code => {
      done = true
      resolve({ code })
    }),
  )
  // The guard must not keep the test process alive; its stdin closing is what stops the server.
  guard.unref()
  for (const pipe of [guard.stdin, guard.stderr]) if (pipe instanceof Socket) pipe.unref()
  return {
    onStderr: listener => guard.stderr?.on('data', (chunk: Buffer) => listener(chunk.toString('utf8'))),
    exited,
    running: () => !done,
    stop: async () => {
      if (!done) await stopGuard(guard, exited, STOP_TIMEOUT_MS)
    },
  }
}
