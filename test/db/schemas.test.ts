import { describe, expect, it } from 'vitest'
import { deleteSchema, getCurrentSchema, getSchemaAndVariables, storeSchema } from '../../lib/db/schemas.js'
import { setVariables } from '../../lib/db/variables.js'
import { countStatements } from '../helpers/statements.js'
import { useDatabase } from '../helpers/harness.js'

const db = useDatabase()

const schema = (url: string) => ({
  targets: { hook: { type: 'webhook', name: 'hook', url } },
  triggers: { t: { type: 'basic', name: 't', target: 'hook', entity: 'Article', create: true, delete: false, update: false } },
})

describe('the current schema, as every drain and enqueue reads it', () => {
  it('serves the same stored text from one parse, and a changed schema afresh', async () => {
    await storeSchema(db.pool, 's1', schema('http://127.0.0.1/a'))
    const first = await getCurrentSchema(db.pool, 's1')
    const again = await getCurrentSchema(db.pool, 's1')
    expect(again?.schema).toBe(first?.schema)
    expect(first?.schema.targets.hook?.url).toBe('http://127.0.0.1/a')

    await storeSchema(db.pool, 's1', schema('http://127.0.0.1/b'))
    const changed = await getCurrentSchema(db.pool, 's1')
    expect(changed?.version).toBe(2)
    expect(changed?.schema.targets.hook?.url).toBe('http://127.0.0.1/b')
  })

  it('parses a schema stored again under a reused version number afresh', async () => {
    await storeSchema(db.pool, 's2', schema('http://127.0.0.1/old'))
    expect((await getCurrentSchema(db.pool, 's2'))?.schema.targets.hook?.url).toBe('http://127.0.0.1/old')
    await deleteSchema(db.pool, 's2')
    await storeSchema(db.pool, 's2', schema('http://127.0.0.1/new'))
    const current = await getCurrentSchema(db.pool, 's2')
    expect(current?.version).toBe(1)
    expect(current?.schema.targets.hook?.url).toBe('http://127.0.0.1/new')
  })

  it('hands out a schema nobody can change, since every caller shares it', async () => {
    await storeSchema(db.pool, 's3', schema('http://127.0.0.1/a'))
    const current = await getCurrentSchema(db.pool, 's3')
    const hook = current?.schema.targets.hook
    expect(hook).toBeDefined()
    expect(Object.isFrozen(current?.schema)).toBe(true)
    expect(() => {
      Object.assign(hook ?? {}, { url: 'http://127.0.0.1/changed' })
    }).toThrow(TypeError)
  })
})

describe('what a drain starts from', () => {
  it('reads the current schema and every variable, paired by name, in one statement', async () => {
    await storeSchema(db.pool, 'd1', schema('http://127.0.0.1/one'))
    await storeSchema(db.pool, 'd1', schema('http://127.0.0.1/two'))
    await setVariables(db.pool, 'd1', { ZED: 'last', ALPHA: 'first, with "quotes" and {braces}', MID: '' }, 'set')
    await setVariables(db.pool, 'other', { ALPHA: 'not mine' }, 'set')
    const counted = countStatements(db.pool)
    const { stored, variables } = await getSchemaAndVariables(db.pool, 'd1')
    expect(counted.count()).toBe(1)
    expect(stored?.version).toBe(2)
    expect(stored?.schema.targets.hook?.url).toBe('http://127.0.0.1/two')
    // The same parse as getCurrentSchema's: one frozen object per stored text.
    expect(stored?.schema).toBe((await getCurrentSchema(db.pool, 'd1'))?.schema)
    expect(Object.fromEntries(variables)).toEqual({ ALPHA: 'first, with "quotes" and {braces}', MID: '', ZED: 'last' })
  })

  it('answers for a project with variables and no schema, and for one with neither', async () => {
    await setVariables(db.pool, 'd2', { A: '1' }, 'set')
    const some = await getSchemaAndVariables(db.pool, 'd2')
    expect(some.stored).toBeUndefined()
    expect(Object.fromEntries(some.variables)).toEqual({ A: '1' })
    const none = await getSchemaAndVariables(db.pool, 'nobody')
    expect(none.stored).toBeUndefined()
    expect(none.variables.size).toBe(0)
  })
})
