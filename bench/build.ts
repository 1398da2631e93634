/**
 * `npm run bench` runs the bench from an esbuild bundle of its TypeScript (this script makes it), not
 * under tsx: the dispatch Lambda runs an esbuild bundle (serverless.yml, `custom.esbuild`), and tsx
 * compiles with `keepNames`, which wraps every function the code creates at run time in a
 * `defineProperty` call (`__name`). Under tsx, `actions-b1` cost the dispatcher ~10% more CPU per event
 * (bench/profile.ts, 197 against 178 µs). Only our code is bundled, with the deployment's settings
 * (ES module, Node 22, no minifying); packages load from node_modules as they do for every contender.
 * The bench's children (receiver, dispatcher, producer, collector) are entry points too: bench/child.ts forks
 * their bundles when it runs from one. So is bench/profile.ts, to profile the deployed shape. The bundles lie two levels below the root, as lib/db does, so
 * lib's paths relative to its modules (the migrations) resolve alike; the bench's own root files are
 * found with bench/repo.ts.
 */
import { build } from 'esbuild'
import { fileURLToPath } from 'node:url'

const BUILD_DIR = fileURLToPath(new URL('../.bench-build/', import.meta.url))
const ENTRIES = ['run', 'receiver', 'dispatcher', 'producer', 'collector', 'profile'].map(name =>
  fileURLToPath(new URL(`./${name}.ts`, import.meta.url)),
)

await build({
  entryPoints: ENTRIES,
  outbase: fileURLToPath(new URL('..', import.meta.url)),
  outdir: BUILD_DIR,
  outExtension: { '.js': '.mjs' },
  bundle: true,
  packages: 'external',
  platform: 'node',
  format: 'esm',
  target: 'node22',
  sourcemap: true,
  logLevel: 'warning',
})
