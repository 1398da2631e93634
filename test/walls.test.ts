// The import wall (.dependency-cruiser.cjs) over the repository, and over a small tree planted with
// what it must refuse, so the check is seen to fail. The cruiser runs as its own CLI, as a
// contributor runs it (`npx depcruise lib functions local bench console vendor`).
import { execFile } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const CONFIG = join(ROOT, '.dependency-cruiser.cjs')
const CLI = join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruiser.mjs')
/**
 * The whole repository cruises in about 3 s on a quiet core; a machine at a load of 19 on 2 cores took
 * over 60 s. Each test waits for one cruise at most this long, plus TEST_SLACK_MS for its own work.
 */
const CRUISE_TIMEOUT_MS = 240_000
const TEST_SLACK_MS = 30_000

type Violation = { rule: { name: string }; from: string; to: string }

/** Runs the cruiser in `cwd` over `paths` with the repository's rules; its violations, one per arrow. */
function cruise(cwd: string, paths: string[]): Promise<Violation[]> {
  return new Promise((done, fail) => {
    execFile(
      process.execPath,
      [CLI, '--config', CONFIG, '--output-type', 'json', ...paths],
      { cwd, timeout: CRUISE_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        // A violation makes the CLI exit non-zero with the report on stdout; anything else is a fault.
        if (error && !stdout) return fail(new Error(`dependency-cruiser failed: ${stderr.slice(0, 2000)}`, { cause: error }))
        try {
          const report = JSON.parse(stdout) as { summary: { violations: Violation[] } }
          done(report.summary.violations)
        } catch (cause) {
          fail(new Error(`dependency-cruiser printed no JSON report: ${stderr.slice(0, 2000)}`, { cause }))
        }
      },
    )
  })
}

const shown = (vs: Violation[]) => vs.map(v => `${v.rule.name}: ${v.from} -> ${v.to}`)

describe('the import wall', () => {
  it(
    'holds over the repository: no circle, nothing back up, lib/ free of Lambda, the doors apart',
    async () => {
      const violations = await cruise(ROOT, ['lib', 'functions', 'local', 'bench', 'console', 'vendor'])
      expect(shown(violations)).toEqual([])
    },
    CRUISE_TIMEOUT_MS + TEST_SLACK_MS,
  )

  const planted = mkdtempSync(join(tmpdir(), 'actions-walls-'))
  afterAll(() => rmSync(planted, { recursive: true, force: true }))

  it(
    'refuses a planted circle, an arrow back up, a door importing the other and Lambda types in lib/',
    async () => {
      const files: Record<string, string> = {
        'package.json': '{"type":"module"}',
        'tsconfig.json': JSON.stringify({
          compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true },
          include: ['lib'],
        }),
        'lib/config.ts': 'export type Config = { a: 1 }\n',
        'lib/db/pool.ts': "import type { Config } from '../config.js'\nexport type P = Config\n",
        'lib/dispatch/a.ts': "import { b } from './b.js'\nexport const a = (): number => b()\n",
        'lib/dispatch/b.ts': "import { a } from './a.js'\nexport const b = (): number => a()\n",
        'lib/admin/shape.ts': 'export const shape = 1\n',
        'lib/cli/print.ts': "import { shape } from '../admin/shape.js'\nexport const print = shape\n",
        'lib/sweeper/handler.ts': "import type { Context } from 'aws-lambda'\nexport type C = Context\n",
        'node_modules/@types/aws-lambda/package.json': '{"name":"@types/aws-lambda","types":"index.d.ts"}',
        'node_modules/@types/aws-lambda/index.d.ts': 'export interface Context { awsRequestId: string }\n',
      }
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(planted, path)), { recursive: true })
        writeFileSync(join(planted, path), text)
      }
      copyFileSync(CONFIG, join(planted, '.dependency-cruiser.cjs'))
      const violations = shown(await cruise(planted, ['lib']))
      expect(violations).toEqual(
        expect.arrayContaining([
          'no-circular: lib/dispatch/a.ts -> lib/dispatch/b.ts',
          'rooms-stay-down: lib/db/pool.ts -> lib/config.ts',
          'cli-not-admin: lib/cli/print.ts -> lib/admin/shape.ts',
          'lib-free-of-lambda: lib/sweeper/handler.ts -> node_modules/@types/aws-lambda/index.d.ts',
        ]),
      )
    },
    CRUISE_TIMEOUT_MS + TEST_SLACK_MS,
  )
})
