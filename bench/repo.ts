import { existsSync } from 'node:fs'

/**
 * A file at the repository's root (beside package.json), found from this module upward: the same from
 * the bench's sources (bench/) as from their bundle (.bench-build/bench/, bench/build.ts).
 */
export function repoFile(name: string): URL {
  for (let dir = new URL('./', import.meta.url); ; dir = new URL('../', dir)) {
    if (existsSync(new URL('package.json', dir))) return new URL(name, dir)
    if (dir.pathname === '/') throw new Error(`bench: no package.json above ${import.meta.url}`)
  }
}
