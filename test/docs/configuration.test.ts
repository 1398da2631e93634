import { readFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import { configSchema } from '../../lib/config.js'

// docs/configuration.md holds one table, `| Setting | Param | Default | Meaning |`, one row per key of
// configSchema. The page is what operators read, so it is checked against the schema itself: keys both
// ways, and each documented default against what the schema yields when the variable is unset.

const HEADER = '| Setting | Param | Default | Meaning |'
/** What the page writes for "no default" (required, or optional without one). */
const NONE = '—'

type Row = { setting: string; param: string; default: string; line: number }

/** A table line's cells, trimmed (a formatter may pad them). */
const cellsOf = (line: string) =>
  line
    .trim()
    .replace(/^\||\|$/g, '')
    .split('|')
    .map(c => c.trim())
const isHeader = (line: string) => line.trim().startsWith('|') && cellsOf(line).join('|') === cellsOf(HEADER).join('|')

/** The table's rows; throws naming the line when one does not read as four cells with a backticked key. */
function parseTable(page: string): Row[] {
  const lines = page.split('\n')
  const start = lines.findIndex(isHeader)
  if (start < 0) throw new Error(`docs/configuration.md: no table with the header ${HEADER}`)
  if (lines.filter(isHeader).length > 1) throw new Error('docs/configuration.md: more than one configuration table')
  const rows: Row[] = []
  // The header, then the delimiter row, then rows until the first line that is not one.
  for (let i = start + 2; i < lines.length && lines[i]?.trim().startsWith('|'); i++) {
    const cells = cellsOf(lines[i] ?? '')
    const setting = /^`([A-Z0-9_]+)`$/.exec(cells[0] ?? '')?.[1]
    if (cells.length !== 4 || !setting) throw new Error(`docs/configuration.md:${i + 1}: expected | \`KEY\` | param | default | meaning |`)
    rows.push({ setting, param: cells[1] ?? '', default: cells[2] ?? '', line: i + 1 })
  }
  return rows
}

/** The default as the page writes it: the value in backticks (`''` for an empty string), or — when there is none. */
function documentedDefault(value: unknown): string {
  if (value === undefined) return NONE
  if (value === '') return "`''`"
  return '`' + String(value) + '`'
}

/** What the schema yields for `key` when its variable is unset: its default, or undefined (required or optional). */
function schemaDefault(key: keyof typeof configSchema.shape): unknown {
  const parsed = configSchema.shape[key].safeParse(undefined)
  return parsed.success ? parsed.data : undefined
}

const keys = Object.keys(configSchema.shape) as Array<keyof typeof configSchema.shape>
const isKey = (k: string): k is keyof typeof configSchema.shape => Object.hasOwn(configSchema.shape, k)

describe('docs/configuration.md', async () => {
  const rows = parseTable(await readFile(new URL('../../docs/configuration.md', import.meta.url), 'utf8'))

  it('has a row for every configSchema key', () => {
    const documented = new Set(rows.map(r => r.setting))
    expect(keys.filter(k => !documented.has(k))).toEqual([])
  })

  it('names no key the schema does not have, and none twice', () => {
    expect(rows.filter(r => !isKey(r.setting)).map(r => `${r.setting} (line ${r.line})`)).toEqual([])
    const seen = rows.map(r => r.setting)
    expect(seen.filter((k, i) => seen.indexOf(k) !== i)).toEqual([])
  })

  it('documents each default as the schema yields it when the variable is unset', () => {
    const wrong: string[] = []
    for (const r of rows) {
      if (!isKey(r.setting)) continue
      const expected = documentedDefault(schemaDefault(r.setting))
      if (r.default !== expected) wrong.push(`${r.setting}: page ${r.default}, schema ${expected}`)
    }
    expect(wrong).toEqual([])
  })

  it('writes each param as a backticked name or —', () => {
    expect(rows.filter(r => r.param !== NONE && !/^`[A-Za-z][A-Za-z0-9]*`$/.test(r.param)).map(r => r.setting)).toEqual([])
  })
})

describe('the table parser', () => {
  // The checks above are only as good as the parser: a page it misreads would pass them vacuously.
  it('reads rows, and refuses a row that is not four cells with a key', () => {
    const page = `${HEADER}\n|---|---|---|---|\n| \`A_B\` | \`aB\` | \`10\` | text |\n| \`C\` | — | — | more |\n\nafter`
    expect(parseTable(page).map(r => [r.setting, r.param, r.default])).toEqual([
      ['A_B', '`aB`', '`10`'],
      ['C', '—', '—'],
    ])
    expect(() => parseTable(`${HEADER}\n|---|---|---|---|\n| A_B | — | — |`)).toThrow(/expected/)
    expect(() => parseTable('no table here')).toThrow(/no table/)
    expect(parseTable('| Setting   | Param | Default | Meaning    |\n| --- | --- | --- | --- |\n| `K` | — | `1` | padded |')).toHaveLength(
      1,
    )
  })

  it('spells defaults as the page does', () => {
    expect([undefined, '', 'info', 10, false].map(documentedDefault)).toEqual(['—', "`''`", '`info`', '`10`', '`false`'])
  })

  it('finds a wrong default: DB_POOL_MAX documented as 11 differs from the schema', () => {
    expect(documentedDefault(schemaDefault('DB_POOL_MAX'))).toBe('`10`')
    expect(documentedDefault(schemaDefault('DB_POOL_MAX'))).not.toBe('`11`')
    expect(documentedDefault(schemaDefault('DATABASE_URL'))).toBe(NONE)
  })
})
