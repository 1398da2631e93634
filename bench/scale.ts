import type { ActionsBench } from './actions.js'
import { forkChild, withTimeout } from './child.js'
import type { FromDispatcher, ToDispatcher } from './dispatcher.js'
import { timedDelivery, type RunResult, type TimedContext } from './timed.js'

const START_TIMEOUT_MS = 20_000

/** The projects the scale-out rows drain: `count` projects, one webhook target each. */
export const scaleProject = (i: number) => `bench_scale_${i}`

type Dispatcher = {
  init(databaseUrl: string, sqsEndpoint: string, queueUrl: string): Promise<void>
  drain(projects: string[], timeoutMs: number): Promise<{ statements: number; error?: string }>
  cpuMicros(): Promise<number>
  stop(): Promise<void>
}

export type ScaleBench = {
  /** Delivers `n` events spread over `projects` projects with `processes` dispatch processes, each draining every project. */
  deliver(processes: number, projects: number, n: number): Promise<RunResult>
  /** CPU time of all dispatch processes so far, microseconds (for the CPU meter). */
  cpuMicros(): Promise<number>
  close(): Promise<void>
}

/**
 * Scale-out: up to `maxProcesses` dispatch processes (bench/dispatcher.ts), started once and kept warm,
 * over the Actions bench database. Their projects are stored here at `batchSize`.
 */
export async function setupScale(
  actions: ActionsBench,
  opts: {
    databaseUrl: string
    sqsEndpoint: string
    queueUrl: string
    maxProcesses: number
    maxProjects: number
    batchSize: number
    ctx: TimedContext
  },
): Promise<ScaleBench> {
  for (let i = 1; i <= opts.maxProjects; i++) await actions.storeProject(scaleProject(i), opts.batchSize)
  const children: Dispatcher[] = []
  try {
    for (let i = 0; i < opts.maxProcesses; i++) children.push(await startDispatcher())
    await Promise.all(children.map(c => c.init(opts.databaseUrl, opts.sqsEndpoint, opts.queueUrl)))
  } catch (error) {
    await Promise.all(children.map(c => c.stop()))
    throw error
  }
  let statements = 0
  const counter = {
    reset: () => {
      statements = 0
    },
    count: () => statements,
  }

  return {
    deliver: async (processes, projects, n) => {
      await actions.truncate()
      const names = Array.from({ length: projects }, (_, i) => scaleProject(i + 1))
      for (const [i, name] of names.entries()) await actions.prepare(name, Math.floor(n / projects) + (i < n % projects ? 1 : 0))
      return timedDelivery(
        opts.ctx,
        n,
        async () => {
          const errors: string[] = []
          // Every process drains every project, as dispatch invocations woken by signals for all of them would.
          const finished = Promise.all(
            children.slice(0, processes).map(async c => {
              const r = await c.drain(names, opts.ctx.deadlineMs)
              statements += r.statements
              if (r.error) errors.push(r.error)
            }),
          )
          return {
            finished,
            stop: async () => {
              await finished.catch(() => {})
              let done = 0
              for (const name of names) done += await actions.countByState(name, 'succeed')
              return done === n && errors.length === 0
            },
          }
        },
        counter,
      )
    },
    cpuMicros: async () => (await Promise.all(children.map(c => c.cpuMicros()))).reduce((a, b) => a + b, 0),
    close: async () => {
      await Promise.all(children.map(c => c.stop()))
    },
  }
}

async function startDispatcher(): Promise<Dispatcher> {
  const child = forkChild<ToDispatcher, FromDispatcher>(
    new URL('./dispatcher.ts', import.meta.url),
    { BENCH_DISPATCHER: '1' },
    'a dispatch process',
  )
  await withTimeout(
    new Promise<void>((resolve, reject) => {
      child.process.once('spawn', () => resolve())
      child.process.once('error', reject)
    }),
    START_TIMEOUT_MS,
    'a dispatch process did not start',
  )
  const ask = child.ask
  return {
    init: async (databaseUrl, sqsEndpoint, queueUrl) => {
      const r = await ask({ type: 'init', databaseUrl, sqsEndpoint, queueUrl })
      if (r.type !== 'ready') throw new Error(`dispatch process answered ${r.type} to init`)
    },
    drain: async (projects, timeoutMs) => {
      const r = await ask({ type: 'drain', projects }, timeoutMs)
      if (r.type !== 'drained') throw new Error(`dispatch process answered ${r.type} to drain`)
      return { statements: r.statements, ...(r.error === undefined ? {} : { error: r.error }) }
    },
    cpuMicros: async () => {
      const r = await ask({ type: 'cpu' })
      if (r.type !== 'cpu') throw new Error(`dispatch process answered ${r.type} to cpu`)
      return r.micros
    },
    stop: child.stop,
  }
}
