// The console's only network code: relative URLs on its own origin, the token from sessionStorage
// in the Authorization header (never in a URL), problems turned into readable errors.
const TOKEN_KEY = 'actions-console-token'

/** The token of this tab's session, if logged in. */
export const token = (): string | null => sessionStorage.getItem(TOKEN_KEY)
/** Keeps the token for this tab only (sessionStorage ends with the tab). */
export const setToken = (t: string): void => sessionStorage.setItem(TOKEN_KEY, t)
/** Forgets the token. */
export const clearToken = (): void => sessionStorage.removeItem(TOKEN_KEY)

/** A failed call: the status and the problem's title and detail (the API's own words, shown as text). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

/** Called when the API answers 401: the console goes back to the login form. */
let onUnauthorized = (): void => {}
export const whenUnauthorized = (fn: () => void): void => {
  onUnauthorized = fn
}

/** One call of the admin API; `path` starts with /v1/. */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${token() ?? ''}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(path, {
    method,
    headers,
    credentials: 'omit',
    cache: 'no-store',
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const text = await res.text()
  const json: unknown = text ? JSON.parse(text) : undefined
  if (!res.ok) {
    if (res.status === 401) onUnauthorized()
    const p = (json ?? {}) as { title?: string; detail?: string }
    throw new ApiError(res.status, `${res.status} ${p.title ?? ''}${p.detail ? `: ${p.detail}` : ''}`)
  }
  return json as T
}

/** A project's path prefix, the name escaped. */
export const projectPath = (project: string): string => `/v1/projects/${encodeURIComponent(project)}`

/** Who the caller is (GET /v1/whoami). */
export type Whoami = { kind: 'system' } | { kind: 'token'; project: string; role: 'admin' | 'deployer' | 'viewer' }

/** What the caller may do, as the API's roles say (docs/admin-api.md). */
export type Can = { admin: boolean; schema: boolean }
export const canOf = (w: Whoami): Can => ({
  admin: w.kind === 'system' || w.role === 'admin',
  schema: w.kind === 'system' || w.role !== 'viewer',
})

// The answers' shapes are the API's own (type-only: nothing of lib/ is bundled), so a change to a
// shape fails the console's type check instead of drifting from it.
import type { TargetJson } from '../../lib/shapes.js'
export type { EventJson, TargetJson } from '../../lib/shapes.js'
export type { TrendPointJson as TrendPoint, TrendsJson as Trends, TrendSeriesJson as TrendSeries } from '../../lib/admin/rest/trends.js'
export type { AttemptJson as Attempt, EventDetailJson as EventDetail, StatsJson as Stats } from '../../lib/shapes.js'
/** GET …/targets: the targets, and what their `recent` outcomes are counted over. */
export type Targets = { targets: TargetJson[]; recentWindow: { seconds: number; maxEvents: number; limitReached: boolean } }
/** The answer of a bulk retry or stop; with dryRun, `matched` is what the same call without it would change. */
export type BulkResult = { dryRun: boolean; matched: number; changed: number; limit: number; limitReached: boolean }
