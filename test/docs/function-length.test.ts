// Long setup splits by what it starts: no function in local/ or bench/ runs over MAX_FUNCTION_LINES,
// counted from its first line to its last by the compiler's own parse (nested functions count apart,
// and within their parent).
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
/** Reading and parsing the whole tree takes a few seconds on a quiet machine; a loaded one took 16 s. */
const WHOLE_TREE_TIMEOUT_MS = 180_000
/** A function a reader takes in at once: past this, it does more than one thing and splits. */
const MAX_FUNCTION_LINES = 80
const FOLDERS = ['local', 'bench']

/** Every function of `text` longer than `max` lines, as `file:line name (n lines)`. */
function longFunctions(file: string, text: string, max: number): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const out: string[] = []
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line
      const lines = last - first + 1
      if (lines > max) {
        const name = node.name?.getText(source) ?? (ts.isVariableDeclaration(node.parent) ? node.parent.name.getText(source) : 'function')
        out.push(`${file}:${first + 1} ${name} (${lines} lines)`)
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return out
}

const sources = (dir: string): string[] =>
  readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap(e =>
    e.isDirectory() ? sources(`${dir}/${e.name}`) : e.name.endsWith('.ts') ? [`${dir}/${e.name}`] : [],
  )

describe('functions in local/ and bench/', () => {
  it(
    `are at most ${MAX_FUNCTION_LINES} lines each`,
    () => {
      const long = FOLDERS.flatMap(sources).flatMap(f => longFunctions(f, readFileSync(join(ROOT, f), 'utf8'), MAX_FUNCTION_LINES))
      expect(long).toEqual([])
    },
    WHOLE_TREE_TIMEOUT_MS,
  )

  it('counts a function from its first line to its last, arrows and methods too', () => {
    const body = (n: number) => Array.from({ length: n - 2 }, (_, i) => `  const v${i} = ${i}`).join('\n')
    const text = [`function ok() {`, body(4), `}`, `const long = () => {`, body(5), `}`, `class C {`, `  m() {`, body(5), `  }`, `}`].join(
      '\n',
    )
    expect(longFunctions('x.ts', text, 4)).toEqual(['x.ts:5 long (5 lines)', 'x.ts:11 m (5 lines)'])
  })
})
