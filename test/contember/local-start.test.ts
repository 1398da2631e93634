import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest'
import { haveEngine, startEngine, type Engine, type EngineProject } from '../helpers/contember.js'
import { freshDatabase, type TestDatabase } from '../helpers/db.js'
import { startReceiver, type Receiver } from '../helpers/receiver.js'
import { until } from '../helpers/wait.js'

// The README's optional step: `npm start -- --contember <url>` runs the whole path on one machine.

const START = fileURLToPath(new URL('../../local/start.ts', import.meta.url))
const db: TestDatabase = await freshDatabase()
const engineHere = haveEngine()

describe.skipIf(!engineHere)('npm start -- --contember', () => {
  let engine: Engine
  let project: EngineProject
  let receiver: Receiver
  let child: ChildProcess | undefined
  let out = ''

  beforeAll(async () => {
    receiver = await startReceiver()
    engine = await startEngine({ pgUrl: inject('pgAdminUrl') })
    project = await engine.createProject({ hook_a: { url: `${receiver.url}/a` }, hook_b: { url: `${receiver.url}/b` } })
  })
  afterAll(async () => {
    if (child?.pid && child.exitCode === null) process.kill(-child.pid, 'SIGKILL')
    await engine?.stop()
    await receiver?.close()
    await db.drop()
  })

  it("delivers the engine's content mutations through the local stack, and stops on Ctrl-C", async () => {
    child = spawn(process.execPath, ['--import', 'tsx', START, '--port', '0', '--contember', project.dbUrl], {
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: db.url,
        RELAY_POLL_INTERVAL_MS: '500',
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      },
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    child.stdout?.on('data', (c: Buffer) => (out += c.toString()))
    child.stderr?.on('data', () => {})
    const exited = new Promise<number | null>(resolve => child?.once('exit', code => resolve(code)))
    await until('the stack ready', () => out.includes('ready; Ctrl-C to stop'), 60_000)
    expect(out).toContain(`relay      from the Contember outbox of ${project.slug} into Actions`)
    const created = await project.content<{ createArticle: { node: { id: string } } }>(
      `mutation { createArticle(data: { title: "local" }) { node { id } } }`,
    )
    await until('both events delivered', () => receiver.requests.length >= 2, 30_000)
    expect(receiver.requests.map(r => r.path).sort()).toEqual(['/a', '/b'])
    expect(receiver.requests.every(r => r.body.events[0].id === created.createArticle.node.id)).toBe(true)
    if (child.pid) process.kill(-child.pid, 'SIGINT')
    expect(await exited).toBe(0)
    expect(out).toContain('stopped')
  })
})
