// Every pointer in a comment opens inside the repository: a path a comment names exists, and no
// comment points at something a clone does not hold (a design file kept elsewhere, an issue tracker,
// a style guide). The decisions such pointers stood for live in docs/ (docs/design.md for those that
// are no user's business) or in the comment itself.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, extname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
/** Reading and parsing the whole tree takes a few seconds on a quiet machine; a loaded one took 16 s. */
const WHOLE_TREE_TIMEOUT_MS = 180_000
/** The folders whose comments are checked: every one that holds code, statements or scripts. */
const FOLDERS = ['lib', 'functions', 'local', 'bench', 'console', 'test', 'infra', 'vendor', 'examples', 'bin', '.ci']
const SKIPPED_DIRS = new Set(['node_modules', '.bench-build', '.esbuild', '.serverless', '.data'])
/** Generated from console/ sources, whose comments are checked there. */
const GENERATED = new Set(['console/assets.ts'])
/** The repository's top-level files a comment may name without a folder. */
const TOP_LEVEL = /^(README|CONTRIBUTING|CHANGELOG|LICENSE)(\.md)?$|^(serverless\.yml|package\.json|tsconfig\.json|vitest\.config\.ts)$/

/** Pointers to what a clone lacks: a design section, an issue, a style habit, a folder outside the tree. */
const OUTSIDE = [/\bDESIGN\b[^\n]{0,10}§/, /\bhabit \d+/i, /\bissues? #?\d+/i, /\.\.\/shared\b/]
/** A repository path as comments write it: a known top folder, then at least one segment with an extension. */
const PATH = /(?<![\w./-])((?:lib|functions|local|bench|console|test|infra|docs|vendor|examples|bin|\.ci)\/[\w./*-]*[\w*])/g

type Comment = { file: string; line: number; text: string }
type Problem = { file: string; line: number; problem: string }

/** The files to read, relative to ROOT. */
function filesUnder(dir: string): string[] {
  const out: string[] = []
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const rel = `${dir}/${entry.name}`
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRS.has(entry.name)) out.push(...filesUnder(rel))
    } else if (!GENERATED.has(rel)) out.push(rel)
  }
  return out
}

/** The comments of a TypeScript or JavaScript file, by the compiler's own scanner (strings and regexes are not comments). */
function scriptComments(file: string, text: string): Comment[] {
  const out: Comment[] = []
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.Standard, text)
  const starts = [0, ...Array.from(text.matchAll(/\n/g), m => m.index + 1)]
  const lineOf = (pos: number) => {
    let [lo, hi] = [0, starts.length - 1]
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if ((starts[mid] ?? 0) <= pos) lo = mid
      else hi = mid - 1
    }
    return lo + 1
  }
  // Open braces inside each `${` of the template literals being scanned: the `}` that closes a
  // substitution resumes the template's text, which is rescanned as such (it is no code, and holds no comment).
  const depths: number[] = []
  let previous: ts.SyntaxKind = ts.SyntaxKind.Unknown
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    if (isComment(kind)) {
      out.push({ file, line: lineOf(scanner.getTokenStart()), text: scanner.getTokenText() })
    } else if (kind === ts.SyntaxKind.TemplateHead) depths.push(0)
    else if (kind === ts.SyntaxKind.OpenBraceToken && depths.length > 0) depths.push((depths.pop() ?? 0) + 1)
    else if (kind === ts.SyntaxKind.CloseBraceToken && depths.length > 0) {
      if (depths[depths.length - 1] === 0) {
        if (scanner.reScanTemplateToken(false) === ts.SyntaxKind.TemplateTail) depths.pop()
      } else depths.push((depths.pop() ?? 1) - 1)
    }
    // A slash after a value is division; elsewhere it may open a regular expression, whose text is no comment.
    else if ((kind === ts.SyntaxKind.SlashToken || kind === ts.SyntaxKind.SlashEqualsToken) && !afterValue(previous)) {
      scanner.reScanSlashToken()
    }
    if (kind !== ts.SyntaxKind.WhitespaceTrivia && kind !== ts.SyntaxKind.NewLineTrivia && !isComment(kind)) previous = kind
  }
  return out
}

const isComment = (kind: ts.SyntaxKind) => kind === ts.SyntaxKind.SingleLineCommentTrivia || kind === ts.SyntaxKind.MultiLineCommentTrivia
/** Tokens after which a slash divides; after any other it opens a regular expression. */
const VALUE_ENDS = new Set([
  ts.SyntaxKind.Identifier,
  ts.SyntaxKind.NumericLiteral,
  ts.SyntaxKind.BigIntLiteral,
  ts.SyntaxKind.StringLiteral,
  ts.SyntaxKind.NoSubstitutionTemplateLiteral,
  ts.SyntaxKind.TemplateTail,
  ts.SyntaxKind.RegularExpressionLiteral,
  ts.SyntaxKind.CloseParenToken,
  ts.SyntaxKind.CloseBracketToken,
  ts.SyntaxKind.CloseBraceToken,
  ts.SyntaxKind.ThisKeyword,
  ts.SyntaxKind.SuperKeyword,
  ts.SyntaxKind.TrueKeyword,
  ts.SyntaxKind.FalseKeyword,
  ts.SyntaxKind.NullKeyword,
])
const afterValue = (kind: ts.SyntaxKind) => VALUE_ENDS.has(kind)

/** The comments of a file that marks them by a line prefix (`--` in SQL, `#` in shell and YAML). */
function lineComments(file: string, text: string, marker: RegExp): Comment[] {
  return text.split('\n').flatMap((line, i) => {
    const at = line.search(marker)
    return at < 0 ? [] : [{ file, line: i + 1, text: line.slice(at) }]
  })
}

/** The comments of one file, by its kind; files that hold no comments of ours give none. */
function commentsOf(file: string, text: string): Comment[] {
  const ext = extname(file)
  if (['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs'].includes(ext)) return scriptComments(file, text)
  if (ext === '.sql') return lineComments(file, text, /--/)
  if (['.sh', '.yml', '.yaml', '.toml', '.conf', ''].includes(ext)) return lineComments(file, text, /(^|\s)#(?![!{])/)
  return []
}

/** What is wrong with the pointers of one comment; `exists` says whether a repository path is there. */
function pointerProblems(comment: Comment, exists: (path: string) => boolean): Problem[] {
  const problems: Problem[] = []
  for (const outside of OUTSIDE) {
    const hit = outside.exec(comment.text)
    if (hit) problems.push({ file: comment.file, line: comment.line, problem: `points outside the repository: "${hit[0]}"` })
  }
  for (const [, raw = ''] of comment.text.matchAll(PATH)) {
    // A trailing sentence mark or a line suffix (`lib/db/claim.ts:12`) is not part of the path.
    const path = raw.replace(/[.:]+$/, '')
    if (!exists(path.split('#')[0] ?? path))
      problems.push({ file: comment.file, line: comment.line, problem: `names ${path}, which the repository lacks` })
  }
  for (const hit of comment.text.matchAll(/(?<![\w/.-])([A-Z]+\.md|serverless\.yml)\b/g)) {
    const name = hit[1] ?? ''
    if (!TOP_LEVEL.test(name) && !exists(name))
      problems.push({ file: comment.file, line: comment.line, problem: `names ${name}, which the repository lacks` })
  }
  return problems
}

/** A path the repository holds, as a file, a folder, or (for an import-style `.js`) its `.ts` source; `*` matches within a name. */
function repoHas(path: string): boolean {
  const full = join(ROOT, path)
  if (path.includes('*')) {
    const [dir, name] = [dirname(full), path.slice(path.lastIndexOf('/') + 1)]
    const glob = new RegExp(
      `^${name
        .split('*')
        .map(part => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*')}$`,
    )
    return !dir.includes('*') && existsSync(dir) && readdirSync(dir).some(entry => glob.test(entry))
  }
  return existsSync(full) || (path.endsWith('.js') && existsSync(full.replace(/\.js$/, '.ts')))
}

describe('pointers in comments', () => {
  it(
    'open inside the repository: every named path exists, and nothing points at a design file, an issue or a habit',
    () => {
      const problems = FOLDERS.filter(f => existsSync(join(ROOT, f)))
        .flatMap(filesUnder)
        .flatMap(file => commentsOf(file, readFileSync(join(ROOT, file), 'utf8')))
        .flatMap(c => pointerProblems(c, repoHas))
      expect(problems.map(p => `${p.file}:${p.line}: ${p.problem}`)).toEqual([])
    },
    WHOLE_TREE_TIMEOUT_MS,
  )

  it('refuses a comment naming a missing file, a design section, an issue and a style habit', () => {
    // The planted pointers are put together here, so that this file holds none of them whole.
    const [design, style] = ['DESIGN' + ' §', 'STYLE' + '.md']
    const text = [
      '// The claim (lib/db/claim.ts) commits before any POST; see lib/db/nowhere.ts.',
      "const s = 'lib/db/in-a-string.ts is no comment'",
      `/* As ${design}4 says, and issue 23; ${style} habit 14. */`,
      '-- not a comment in TypeScript',
    ].join('\n')
    const problems = commentsOf('lib/x.ts', text).flatMap(c => pointerProblems(c, repoHas))
    expect(problems.map(p => `${p.line}: ${p.problem}`)).toEqual([
      '1: names lib/db/nowhere.ts, which the repository lacks',
      `3: points outside the repository: "${design}"`,
      '3: points outside the repository: "habit 14"',
      '3: points outside the repository: "issue 23"',
      `3: names ${style}, which the repository lacks`,
    ])
  })

  it('reads SQL and shell comments by their markers', () => {
    const sql = commentsOf('infra/migrations/x.sql', "SELECT 'lib/gone.ts' -- see lib/gone.ts\n")
    const sh = commentsOf('.ci/run', '#!/usr/bin/env bash\necho "${x}" # from issue 9\n')
    expect(sql.flatMap(c => pointerProblems(c, repoHas)).map(p => p.problem)).toEqual(['names lib/gone.ts, which the repository lacks'])
    expect(sh.flatMap(c => pointerProblems(c, repoHas)).map(p => p.problem)).toEqual(['points outside the repository: "issue 9"'])
  })
})
