import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest'
import { haveEngine, startEngine, type Engine, type EngineProject } from '../helpers/contember.js'
import { startReceiver } from '../helpers/receiver.js'
import { until } from '../helpers/wait.js'

describe.skipIf(!haveEngine())('the Contember engine harness', () => {
  let engine: Engine
  let project: EngineProject

  beforeAll(async () => {
    engine = await startEngine({ pgUrl: inject('pgAdminUrl') })
    project = await engine.createProject({
      hook_a: { url: 'http://127.0.0.1:9/a', headers: { 'x-test': 'a' } },
      hook_b: { url: 'http://127.0.0.1:9/b' },
    })
  })
  afterAll(async () => {
    await engine?.stop()
  })

  it('deploys the fixture actions: two targets with the given urls, a basic and a watch trigger', async () => {
    const { schema } = await project.system<{
      schema: { actions: { targets: Record<string, { url: string; headers?: object }>; triggers: Record<string, { type: string }> } }
    }>(`{ schema }`)
    expect(schema.actions.targets.hook_a).toMatchObject({ url: 'http://127.0.0.1:9/a', headers: { 'x-test': 'a' } })
    expect(schema.actions.targets.hook_b?.url).toBe('http://127.0.0.1:9/b')
    expect(
      Object.values(schema.actions.triggers)
        .map(t => t.type)
        .sort(),
    ).toEqual(['basic', 'watch'])
  })

  it('writes a content mutation into the outbox, one row per trigger, with the selection filled', async () => {
    const created = await project.content<{ createArticle: { ok: boolean; node: { id: string } } }>(
      `mutation { createArticle(data: { title: "Hello", author: { create: { name: "Ann" } } }) { ok node { id } } }`,
    )
    expect(created.createArticle.ok).toBe(true)
    const rows = await project.outbox()
    expect(rows.map(r => [r.trigger, r.target, r.state]).sort()).toEqual([
      ['article_basic', 'hook_a', 'created'],
      ['article_watch', 'hook_b', 'created'],
    ])
    const basic = rows.find(r => r.trigger === 'article_basic')
    expect(basic?.payload).toMatchObject({
      operation: 'create',
      entity: 'Article',
      id: created.createArticle.node.id,
      selection: { title: 'Hello', author: { name: 'Ann' } },
    })
    // Every row of one transaction shares its id and its start time.
    expect(new Set(rows.map(r => r.transaction_id)).size).toBe(1)
  })

  it("restarts with the engine's own dispatcher on, which then sends the backlog written while it was off", async () => {
    const receiver = await startReceiver()
    try {
      const own = await engine.createProject({ hook_a: { url: `${receiver.url}/a` }, hook_b: { url: `${receiver.url}/b` } })
      await own.content(`mutation { createArticle(data: { title: "backlog" }) { ok } }`)
      const ids = (await own.outbox()).map(r => r.id)
      expect(ids).toHaveLength(2)
      expect(receiver.requests).toEqual([])
      await engine.restart({ dispatcher: true })
      await until('the dispatcher sending both rows', () => receiver.requests.length >= 2, 30_000)
      expect(receiver.eventIds().sort()).toEqual([...ids].sort())
      await engine.restart({ dispatcher: false })
    } finally {
      await receiver.close()
    }
  })
})
