import { ValidationError } from '../errors.js'
import { nameProblem } from '../schema/limits.js'
import type { RelaySource } from './relay.js'

/** Contember databases one relay serves at most: each costs connections (docs/database.md) and a loop. */
export const MAX_RELAY_SOURCES = 50

/**
 * Parses relay sources: each `postgres://…/<database>` (the Actions project is the database name,
 * which is the Contember project slug the engine named it after) or `<project>=postgres://…`. Problems
 * name the entry by position, never quote it: a URL may hold a password.
 */
export function parseRelaySources(entries: readonly string[]): RelaySource[] {
  const problems: string[] = []
  const sources: RelaySource[] = []
  if (entries.length === 0) problems.push('no Contember database given')
  if (entries.length > MAX_RELAY_SOURCES) problems.push(`${entries.length} Contember databases, expected at most ${MAX_RELAY_SOURCES}`)
  for (const [i, entry] of entries.slice(0, MAX_RELAY_SOURCES).entries()) {
    const eq = entry.search(/=postgres(ql)?:\/\//)
    const named = eq > 0 ? entry.slice(0, eq) : undefined
    const raw = eq > 0 ? entry.slice(eq + 1) : entry
    let url: URL
    try {
      url = new URL(raw)
    } catch {
      problems.push(`source ${i + 1}: expected postgres://user:password@host:port/database or project=postgres://…`)
      continue
    }
    if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
      problems.push(`source ${i + 1}: expected a postgres:// URL`)
      continue
    }
    const project = named ?? decodeURIComponent(url.pathname.replace(/^\//, ''))
    if (!project) {
      problems.push(`source ${i + 1}: the URL names no database (the Contember project's database is named after its slug)`)
      continue
    }
    const bad = nameProblem(`source ${i + 1} project`, project)
    if (bad) problems.push(bad)
    else if (sources.some(s => s.project === project)) problems.push(`source ${i + 1}: project ${project} is given twice`)
    else sources.push({ project, url: raw })
  }
  if (problems.length) throw new ValidationError('relay sources', problems)
  return sources
}
