// One test setup for every file that needs real parts: a fresh database cloned from the migrated
// template, the in-process SQS emulator, deps built as a cold start builds them, receivers on
// 127.0.0.1 and, when asked, a Pushgateway. `useHarness` registers the hooks; the handles it returns
// are getters, valid from the file's (or describe's) beforeAll on.
import { afterAll, beforeAll, beforeEach } from 'vitest'
import type { DrainOptions } from '../../lib/dispatch/drain.js'
import { freshDatabase, type TestDatabase } from './db.js'
import { startPushgateway, type RunningPushgateway } from './pushgateway.js'
import { startReceiver, type Receiver, type Responder } from './receiver.js'
import { testEnv, type TestEnv } from './runtime.js'

/** A drain with no deadline: runs until nothing is due (what a test of the drain itself wants). */
export const FOREVER: DrainOptions = { remainingMs: () => Number.POSITIVE_INFINITY }

/** Answers 200 with an empty body: what a receiver does unless a test says otherwise. */
const ok: Responder = (_, res) => {
  res.end()
}

export type HarnessOptions<K extends string> = {
  /** Settings over the test defaults, as `loadConfig` reads them from the environment. */
  config?: Record<string, string>
  /** Starts one receiver, `h.rx`, answering with this responder (`true`: 200, empty body). */
  receiver?: true | Responder
  /** Starts one receiver per name, `h.receiver(name)`, each answering with its responder. */
  receivers?: Record<K, true | Responder>
  /** Prefix of `h.project`, a project name of its own for every test (`wire` → wire1, wire2, …). */
  project?: string
  /** Starts a throwaway Pushgateway before the deps, `h.pushgateway`, and sets PUSHGATEWAY_URL to it. */
  pushgateway?: boolean
}

/**
 * What `useHarness` hands back. Before every test each receiver forgets its requests and answers
 * with its own responder again, the signal queue is emptied, and `project` is a new name.
 */
export type Harness<K extends string = never> = Omit<TestEnv, 'close'> & {
  readonly rx: Receiver
  /** The receiver started under `name` (option `receivers`). */
  receiver(name: K): Receiver
  readonly pushgateway: RunningPushgateway
  /** This test's project name. */
  readonly project: string
  /** Moves on to a new project name within one test, and returns it. */
  nextProject(): string
  /** The environment an operator's shell would have for the CLI: the database and the signal queue. */
  cliEnv(): NodeJS.ProcessEnv
}

/** Registers beforeAll/beforeEach/afterAll for the parts asked for, and returns typed handles to them. */
export function useHarness<K extends string = never>(options: HarnessOptions<K> = {}): Harness<K> {
  let env: TestEnv | undefined
  let rx: Receiver | undefined
  let pushgateway: RunningPushgateway | undefined
  const named = new Map<string, Receiver>()
  const started = receiverSet()
  const prefix = options.project ?? 'p'
  let n = 0
  let project = `${prefix}${n}`

  const ready = <T>(what: string, value: T | undefined): T => {
    if (value === undefined) throw new Error(`harness: ${what} is not started (used before beforeAll, or not asked for)`)
    return value
  }
  beforeAll(async () => {
    if (options.pushgateway) pushgateway = await startPushgateway()
    env = await testEnv({ ...(pushgateway ? { PUSHGATEWAY_URL: pushgateway.url } : {}), ...options.config })
    if (options.receiver) rx = await started.start(options.receiver)
    for (const [name, responder] of Object.entries<true | Responder>(options.receivers ?? {}))
      named.set(name, await started.start(responder))
  })
  beforeEach(async () => {
    project = `${prefix}${++n}`
    started.reset()
    await env?.queue.drain()
  })
  afterAll(async () => {
    await started.close()
    await env?.close()
    await pushgateway?.stop()
  })

  return {
    get deps() {
      return ready('deps', env).deps
    },
    get queue() {
      return ready('queue', env).queue
    },
    get db() {
      return ready('database', env).db
    },
    get log() {
      return ready('log', env).log
    },
    get captureLogs() {
      return ready('log', env).captureLogs
    },
    get rx() {
      return ready('receiver', rx)
    },
    receiver: name => ready(`receiver ${name}`, named.get(name)),
    get pushgateway() {
      return ready('pushgateway', pushgateway)
    },
    get project() {
      return project
    },
    nextProject: () => (project = `${prefix}${++n}`),
    cliEnv: () => {
      const { db, queue } = ready('deps', env)
      return {
        DATABASE_URL: db.url,
        SIGNAL_QUEUE_URL: queue.queueUrl,
        AWS_ENDPOINT_URL_SQS: queue.endpoint,
        AWS_ACCESS_KEY_ID: 'test',
        AWS_SECRET_ACCESS_KEY: 'test',
      }
    },
  }
}

/** One receiver for tests that need nothing else; before every test it forgets its requests and answers with `responder` again. */
export function useReceiver(responder: true | Responder = true): Receiver {
  const rx = later<Receiver>('the receiver')
  const started = receiverSet()
  beforeAll(async () => {
    rx.set(await started.start(responder))
  })
  beforeEach(() => started.reset())
  afterAll(() => started.close())
  return rx.handle
}

/** A fresh database for the file (or describe), for tests that need Postgres and nothing else. */
export function useDatabase(): TestDatabase {
  const db = later<TestDatabase>('the database')
  let created: TestDatabase | undefined
  beforeAll(async () => {
    db.set((created = await freshDatabase()))
  })
  afterAll(async () => {
    await created?.drop()
  })
  return db.handle
}

/**
 * A handle to a part that beforeAll starts: every property read goes to the part once it exists, and
 * fails naming it before then (a test file's top level runs before its hooks).
 */
function later<T extends object>(what: string): { handle: T; set(value: T): void } {
  let value: T | undefined
  const handle = new Proxy<T>(Object.create(null), {
    get: (_, key) => {
      if (value === undefined) throw new Error(`harness: ${what} is not started yet (used before beforeAll)`)
      return Reflect.get(value, key)
    },
  })
  return {
    handle,
    set: v => {
      value = v
    },
  }
}

/** Receivers started for one file, each with the responder it returns to before every test. */
function receiverSet() {
  const responders = new Map<Receiver, Responder>()
  return {
    start: async (responder: true | Responder): Promise<Receiver> => {
      const r = responder === true ? ok : responder
      const receiver = await startReceiver(r)
      responders.set(receiver, r)
      return receiver
    },
    reset: () => {
      for (const [receiver, responder] of responders) {
        receiver.requests.length = 0
        receiver.respond(responder)
      }
    },
    close: async () => {
      for (const receiver of responders.keys()) await receiver.close()
    },
  }
}
