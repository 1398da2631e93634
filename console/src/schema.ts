// Schema: the project's targets and triggers, read-only, and its variables by name only (the API
// never sends a value). A viewer may not read the schema (it holds URLs and headers): names only.
import { api, projectPath } from './api.js'
import { h, table, when } from './dom.js'
import { failed, show, type PageContext } from './page.js'

type Stored = {
  version: number
  schema: { targets?: Record<string, Record<string, unknown>>; triggers?: Record<string, Record<string, unknown>> }
}

const text = (v: unknown): string =>
  typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : v === undefined ? '' : JSON.stringify(v)

/** Draws the Schema page of ctx.project. */
export async function schemaPage(ctx: PageContext): Promise<void> {
  const title = `Schema of ${ctx.project}`
  try {
    const p = projectPath(ctx.project)
    const vars = await api<{ variables: Array<{ name: string; updatedAt: string }> }>('GET', `${p}/variables`)
    const varTable = table(
      ['Variable', 'Changed'],
      vars.variables.map(v => h('tr', {}, h('td', {}, v.name), h('td', {}, when(v.updatedAt)))),
    )
    if (!ctx.can.schema)
      return show(ctx.root, title, h('p', {}, 'A viewer token does not read the schema.'), h('h2', {}, 'Variables'), varTable)
    const { version, schema } = await api<Stored>('GET', `${p}/schema`)
    const targets = Object.entries(schema.targets ?? {}).map(([name, t]) =>
      h(
        'tr',
        {},
        h('th', { scope: 'row' }, name),
        h('td', {}, text(t['url'])),
        h('td', {}, text(t['maxAttempts'])),
        h('td', {}, text(t['timeoutMs'])),
      ),
    )
    const triggers = Object.entries(schema.triggers ?? {}).map(([name, t]) =>
      h(
        'tr',
        {},
        h('th', { scope: 'row' }, name),
        h('td', {}, text(t['type'])),
        h('td', {}, text(t['entity'])),
        h('td', {}, text(t['target'])),
      ),
    )
    show(
      ctx.root,
      title,
      h('p', {}, `Version ${version}`),
      h('h2', {}, 'Targets'),
      table(['Target', 'URL', 'Max attempts', 'Timeout (ms)'], targets),
      h('h2', {}, 'Triggers'),
      table(['Trigger', 'Type', 'Entity', 'Target'], triggers),
      h('h2', {}, 'Variables'),
      varTable,
    )
  } catch (e) {
    failed(ctx.root, title, e)
  }
}
