import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest'
import { haveEngine, startEngine, type Engine, type EngineProject } from '../helpers/contember.js'
import { freshDatabase, type TestDatabase } from '../helpers/db.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'
import { useLocalStack } from '../helpers/stack.js'
import { until } from '../helpers/wait.js'

// `actions relay run` as an operator runs it beside the engine: a process of its own, killed with
// SIGKILL in the middle of a backlog and started again, then stopped with SIGTERM.

const CLI = fileURLToPath(new URL('../../bin/actions.mjs', import.meta.url))
/** Articles per content transaction, and transactions: each article fires two rows (basic and watch). */
const PER_TRANSACTION = 100
const TRANSACTIONS = 3
const ROWS = PER_TRANSACTION * TRANSACTIONS * 2

const db: TestDatabase = await freshDatabase()
const engineHere = haveEngine()
const handle = useLocalStack(db)

type Running = { child: ChildProcess; stderr: () => string; exited: Promise<number | null> }

describe.skipIf(!engineHere)('the relay process', () => {
  let engine: Engine
  let project: EngineProject
  let receiver: Receiver
  const running: Running[] = []

  const startProcess = (): Running => {
    const { stack } = handle
    const child = spawn(process.execPath, [CLI, 'relay', 'run', '--contember', project.dbUrl, '--batch-size', '5', '--health-port', '0'], {
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: db.url,
        SIGNAL_QUEUE_URL: stack.queueUrl,
        AWS_ENDPOINT_URL_SQS: stack.sqsEndpoint ?? '',
        AWS_ACCESS_KEY_ID: 'local',
        AWS_SECRET_ACCESS_KEY: 'local',
        AWS_REGION: 'us-east-1',
        LOG_LEVEL: 'warn',
        RELAY_POLL_INTERVAL_MS: '500',
      },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let err = ''
    child.stderr?.on('data', (c: Buffer) => (err += c.toString()))
    child.stdout?.on('data', () => {})
    const exited = new Promise<number | null>(resolve => child.once('exit', code => resolve(code)))
    const r = { child, stderr: () => err, exited }
    running.push(r)
    return r
  }
  const killGroup = (r: Running, signal: NodeJS.Signals) => {
    try {
      if (r.child.pid) process.kill(-r.child.pid, signal)
    } catch {
      // Already gone.
    }
  }
  const healthUrl = async (r: Running) => {
    let url: string | undefined
    await until(
      'the relay printing its health URL',
      () => (url = /health at (http:\/\/\S+?\/health)/.exec(r.stderr())?.[1]) !== undefined,
      30_000,
    )
    return url ?? ''
  }
  const actionsIds = async () =>
    (await db.pool.query<{ id: string }>(`SELECT id FROM actions_event WHERE project = $1`, [project.slug])).rows.map(r => r.id)

  beforeAll(async () => {
    receiver = await startReceiver()
    engine = await startEngine({ pgUrl: inject('pgAdminUrl') })
    project = await engine.createProject({ hook_a: { url: `${receiver.url}/a` }, hook_b: { url: `${receiver.url}/b` } })
  })
  afterAll(async () => {
    for (const r of running) killGroup(r, 'SIGKILL')
    await Promise.all(running.map(r => r.exited))
    await engine?.stop()
    await receiver?.close()
    await db.drop()
  })

  it('loses nothing and delivers nothing twice when killed mid-backlog and started again, and stops on SIGTERM', async () => {
    for (let t = 0; t < TRANSACTIONS; t++) {
      const creates = Array.from({ length: PER_TRANSACTION }, (_, i) => `a${i}: createArticle(data: { title: "t${t}-${i}" }) { ok }`).join(
        ' ',
      )
      await project.content(`mutation { transaction { ok ${creates} } }`)
    }
    const written = (await project.outbox()).map(r => r.id)
    expect(written).toHaveLength(ROWS)

    const first = startProcess()
    const health = await healthUrl(first)
    expect((await fetch(`${health}`, { signal: AbortSignal.timeout(5000) })).status).toBe(200)
    // Killed once some rows moved and many have not.
    await until('a part of the backlog moved', async () => (await actionsIds()).length >= 20, 30_000)
    killGroup(first, 'SIGKILL')
    await first.exited
    const movedBefore = (await actionsIds()).length
    expect(movedBefore).toBeLessThan(ROWS)
    // Nothing lost: every row is in the outbox, in Actions, or (a crash between the two commits) in both.
    const outboxNow = new Set((await project.outbox()).map(r => r.id))
    const inActions = new Set(await actionsIds())
    expect(written.filter(id => !outboxNow.has(id) && !inActions.has(id))).toEqual([])

    const second = startProcess()
    await until('the outbox empty', async () => (await project.outbox()).length === 0, 60_000)
    await until('every row delivered', () => new Set(receiver.eventIds()).size === ROWS, 60_000)
    // Nothing twice: each id once in Actions and once at the receiver.
    expect((await actionsIds()).sort()).toEqual([...written].sort())
    await new Promise(r => setTimeout(r, 500))
    expect(receiver.eventIds().length).toBe(ROWS)

    killGroup(second, 'SIGTERM')
    expect(await second.exited).toBe(0)
    expect(second.stderr()).toMatch(/relay stopping \(SIGTERM\)[\s\S]*relay stopped/)
  })
})
