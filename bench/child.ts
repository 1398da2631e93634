import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** Messages a child sends: replies carry the id of the request they answer; notices carry none. */
type Message = { type: string; id?: number }

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

/** The parent's side of a bench child process (receiver, producer, dispatcher), over IPC. */
export type Child<Request extends { type: string; id: number }, Reply extends Message> = {
  process: ChildProcess
  /** Sends a request and resolves with the reply carrying its id; rejects after `timeoutMs`. */
  ask(request: DistributiveOmit<Request, 'id'>, timeoutMs?: number, id?: number): Promise<Reply>
  /** A fresh request id, for a request whose id must be known before it is sent. */
  nextId(): number
  /** Resolves with what `pick` makes of the first message it accepts; rejects (and kills the child) if the child exits first or after `timeoutMs`. */
  first<T>(pick: (m: Reply) => T | undefined, what: string, timeoutMs?: number): Promise<T>
  /** Sends a message that expects no reply (nothing if the child is gone). */
  post(message: object): void
  /** Disconnects and waits for the exit, killing the child if it does not go within 5 s. */
  stop(): Promise<void>
}

const START_TIMEOUT_MS = 20_000
/**
 * How long a child may take to answer a request that is not a run (init, usage). A child's first answer
 * waits for its bundle to load: on the 2-core box shared at a load average of 15, four dispatchers
 * forked at once took more than 10 s, and the whole run ended there.
 */
const REPLY_TIMEOUT_MS = 30_000

// Run from bench/build.ts' bundle (`npm run bench`), this module is part of an .mjs entry point, and
// each child's bundle lies beside it; run under tsx (`npx tsx bench/...`), children run under tsx too.
const BUNDLED = import.meta.url.endsWith('.mjs')

/**
 * Forks a bench script the way the parent runs: its bundle beside the parent's (`x.ts` → `x.mjs`), or
 * under tsx (through tsx's loader, resolved from here). `onNotice` sees every message first; the
 * messages it does not take (returns false) and that carry an id answer the request with that id.
 * `label` names the child in errors.
 */
export function forkChild<Request extends { type: string; id: number }, Reply extends Message>(
  script: URL,
  env: Record<string, string>,
  label: string,
  onNotice: (m: Reply) => boolean = () => false,
): Child<Request, Reply> {
  const child = fork(fileURLToPath(BUNDLED ? new URL(script.href.replace(/\.ts$/, '.mjs')) : script), [], {
    execArgv: BUNDLED ? ['--enable-source-maps'] : ['--import', import.meta.resolve('tsx')],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  let lastId = 0
  let exited = false
  const replies = new Map<number, (m: Reply) => void>()
  const gone = new Promise<void>(resolve =>
    child.once('exit', () => {
      exited = true
      resolve()
    }),
  )
  child.on('message', (m: Reply) => {
    if (onNotice(m) || m.id === undefined) return
    replies.get(m.id)?.(m)
    replies.delete(m.id)
  })
  return {
    process: child,
    ask: (request, timeoutMs = REPLY_TIMEOUT_MS, id = ++lastId) =>
      withTimeout(
        new Promise<Reply>(resolve => {
          replies.set(id, resolve)
          child.send({ ...request, id })
        }),
        timeoutMs,
        `${label} did not answer "${request.type}"`,
      ).finally(() => replies.delete(id)),
    nextId: () => ++lastId,
    first: async (pick, what, timeoutMs = START_TIMEOUT_MS) => {
      try {
        return await withTimeout(
          new Promise((resolve, reject) => {
            child.on('message', (m: Reply) => {
              const picked = pick(m)
              if (picked !== undefined) resolve(picked)
            })
            child.once('exit', code => reject(new Error(`${label} exited with code ${code} before ${what}`)))
          }),
          timeoutMs,
          `${label} did not ${what}`,
        )
      } catch (error) {
        if (!exited) child.kill('SIGKILL')
        throw error
      }
    },
    // A failed send means the child is gone; whoever waits for it has its own bound.
    post: message => {
      if (!exited) child.send(message, () => {})
    },
    stop: async () => {
      if (exited) return
      child.disconnect()
      await withTimeout(gone, 5_000, `${label} did not exit`).catch(() => {
        child.kill('SIGKILL')
      })
    },
  }
}

/** Thrown by `withTimeout`; callers tell a missed deadline from a failure by its class. */
export class DeadlineError extends Error {
  override name = 'DeadlineError'
}

/** Rejects with a DeadlineError when `promise` has not settled within `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(`${message} (after ${ms} ms)`)), ms)
    // A deadline alone never keeps the process alive: whatever it guards does, while it is pending.
    timer.unref()
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}
