// The JSON the admin API answers with and the CLI's --json prints: one shape per thing an
// operator reads, built by pure functions from the rows lib/db returns. Timestamps are ISO 8601 UTC
// strings. Variable values never appear here: a variable is its name and when it last changed.
import type { EventSummaryRow, ProjectStats } from './db/admin-events.js'
import { FAILED_COUNT_CAP, type TargetOutcomes } from './db/admin-recent.js'
import type { ListedEvent } from './db/operator.js'
import { pauseKind, pauseLabel, type TargetHealth } from './db/pauses.js'
import type { EventRow, EventState } from './events.js'
import { noRedaction, type Redactor } from './text.js'

export type { EventSummaryRow }

/** Every state an event can be in, in the order stats list them. */
export const EVENT_STATES: readonly EventState[] = ['created', 'retrying', 'processing', 'succeed', 'failed', 'stopped']

/** One event in a listing. */
export type EventJson = {
  id: string
  project: string
  state: EventState
  target: string
  trigger: string
  /** Attempts made so far (the row's num_retries). */
  attempts: number
  createdAt: string
  lastStateChange: string
  /** When the event is (or was) due: its next attempt, or the lease end while processing. */
  visibleAt: string
  resolvedAt: string | null
  /** The start of the last attempt's error, redacted with the project's variables; null when none. */
  lastError: string | null
}

/** One failed attempt of an event's log, its text redacted. Fields a stored entry lacks are left out. */
export type AttemptJson = { ok: boolean; code?: number; errorMessage?: string; response?: string; durationMs?: number }

/** One event with its attempt log (GET …/events/:id). */
export type EventDetailJson = EventJson & {
  transactionId: string
  stage: string | null
  priority: number
  schemaVersion: number
  payload: Record<string, unknown>
  log: AttemptJson[]
  /** Entries dropped between the first and the last kept (migration 010). */
  logDropped: number
  identityId: string | null
  ipAddress: string | null
  userAgent: string | null
}

/** A listing row as the API shows it; `redact` hides the project's variable values in receiver text. */
export function eventJson(row: EventSummaryRow, redact: Redactor = noRedaction): EventJson {
  return {
    id: row.id,
    project: row.project,
    state: row.state,
    target: row.target,
    trigger: row.trigger,
    attempts: row.num_retries,
    createdAt: row.created_at.toISOString(),
    lastStateChange: row.last_state_change.toISOString(),
    visibleAt: row.visible_at.toISOString(),
    resolvedAt: iso(row.resolved_at),
    lastError: row.last_error == null ? null : redact(row.last_error),
  }
}

/** One whole event with its attempt log, every text of the log redacted with `redact`. */
export function eventDetailJson(row: EventRow, redact: Redactor = noRedaction): EventDetailJson {
  const log = row.log.map(entry => attemptJson(entry, redact))
  const last = log.at(-1)
  return {
    ...eventJson({ ...row, last_error: null }, redact),
    lastError: last?.errorMessage ?? null,
    transactionId: row.transaction_id,
    stage: row.stage,
    priority: row.priority,
    schemaVersion: row.schema_version,
    payload: row.payload,
    log,
    logDropped: row.log_dropped,
    identityId: row.identity_id,
    ipAddress: row.ip_address,
    userAgent: row.user_agent,
  }
}

/** One stored log entry: only the known fields, strings redacted; anything else stored there is left out. */
export function attemptJson(entry: unknown, redact: Redactor = noRedaction): AttemptJson {
  if (typeof entry !== 'object' || entry === null) return { ok: false }
  const e = new Map(Object.entries(entry))
  const text = (k: string) => {
    const v = e.get(k)
    return typeof v === 'string' ? { [k]: redact(v) } : {}
  }
  const int = (k: string) => {
    const v = e.get(k)
    return typeof v === 'number' && Number.isInteger(v) ? { [k]: v } : {}
  }
  return { ok: e.get('ok') === true, ...int('code'), ...text('errorMessage'), ...text('response'), ...int('durationMs') }
}

/** A CLI listing row (lib/db/operator.ts listEvents) as JSON: no timestamps but the due time. */
export type ListedEventJson = Pick<EventJson, 'id' | 'state' | 'target' | 'trigger' | 'attempts' | 'visibleAt' | 'lastError'> & {
  /** The last error's full length in characters (lastError holds only its start). */
  lastErrorChars: number
}

/** A row of the CLI's listings (failed, processing, due) as JSON, its error text redacted. */
export function listedEventJson(row: ListedEvent, redact: Redactor = noRedaction): ListedEventJson {
  return {
    id: row.id,
    state: row.state,
    target: row.target,
    trigger: row.trigger,
    attempts: row.num_retries,
    visibleAt: row.visible_at.toISOString(),
    lastError: row.last_error === null ? null : redact(row.last_error),
    lastErrorChars: row.last_error_chars,
  }
}

/** Due events of one target: how many, and how long the oldest has been due. */
export type TargetBacklog = { due: number; oldestDueAgeSeconds: number }

/** A target's health as the API shows it. */
export type TargetJson = {
  target: string
  /** False for a target with a health row that the current schema no longer has. */
  inSchema: boolean
  state: 'running' | 'paused'
  /** Why it is paused (null when running): the gauges' kind and the operator's label (`misconfigured (401)`). */
  pause: { kind: 'down' | 'misconfigured' | 'operator'; label: string; since: string | null; probeAt: string | null } | null
  /** Batches failed in a row, and since when (0 and null when the last one succeeded). */
  consecutiveFailures: number
  failingSince: string | null
  due: number
  oldestDueAgeSeconds: number
  /** The minute of its last request (batch posted), null when it never sent one (lib/db/trends.ts keeps it). */
  lastRequestAt: string | null
  /** Its events resolved in the last hour (lib/db/admin-recent.ts): delivered, failed for good, and the share delivered. */
  recent: RecentJson
}

/** A target's recent outcomes; `successRate` is succeeded / (succeeded + failed), null when both are 0 (no recent deliveries). */
export type RecentJson = { succeeded: number; failed: number; successRate: number | null }

/** The recent outcomes as the API shows them. */
export function recentJson(o: TargetOutcomes | undefined): RecentJson {
  const succeeded = o?.succeeded ?? 0
  const failed = o?.failed ?? 0
  return { succeeded, failed, successRate: succeeded + failed === 0 ? null : succeeded / (succeeded + failed) }
}

/** One target's health from its health row (none: healthy), its due events and its recent outcomes. */
export function targetJson(
  target: string,
  inSchema: boolean,
  health: TargetHealth | undefined,
  backlog?: TargetBacklog,
  recent?: TargetOutcomes,
  lastRequest?: Date,
): TargetJson {
  const reason = health?.paused_reason ?? null
  return {
    target,
    inSchema,
    state: reason === null ? 'running' : 'paused',
    pause:
      reason === null || !health
        ? null
        : { kind: pauseKind(reason), label: pauseLabel(health) ?? '?', since: iso(health.paused_at), probeAt: iso(health.probe_at) },
    consecutiveFailures: health?.consecutive_failures ?? 0,
    failingSince: iso(health?.failing_since ?? null),
    due: backlog?.due ?? 0,
    oldestDueAgeSeconds: backlog?.oldestDueAgeSeconds ?? 0,
    lastRequestAt: iso(lastRequest ?? null),
    recent: recentJson(recent),
  }
}

/** A variable as anyone but its project's admin sees it: its name and when it last changed, never its value. */
export type VariableJson = { name: string; updatedAt: string }

/** Variables as names and update times; the value is not even read from the row. */
export function variablesJson(rows: ReadonlyArray<{ name: string; updated_at: Date }>): VariableJson[] {
  return rows.map(r => ({ name: r.name, updatedAt: r.updated_at.toISOString() }))
}

/** What the stats are built from: event counts by state, the due backlog, the heartbeat. */
export type StatsInput = { project: string } & ProjectStats

/** A project's numbers (GET …/stats). */
export type StatsJson = {
  project: string
  counts: Record<EventState, number>
  /** False when succeed, failed and stopped were counted over the newest COUNTED_RESOLVED_EVENTS only (lower bounds). */
  countsComplete: boolean
  /** Every due event of the project, whatever its target: the sum of the Targets page's "Due". */
  due: number
  /** Of those, the ones at paused targets: they wait for a probe or an operator, not for dispatch. */
  dueAtPausedTargets: number
  oldestDueAgeSeconds: number
  /** Events in state failed whose failure (last state change) is under 24 h old, at most FAILED_COUNT_CAP. */
  failedLast24h: number
  /** True when the count stopped at the cap: more failed. */
  failedLast24hCapped: boolean
  lastProgressAt: string | null
  lastProgressAgeSeconds: number | null
}

/** The stats of a project, every state counted (0 when absent). */
export function statsJson(s: StatsInput): StatsJson {
  const counts = Object.fromEntries(EVENT_STATES.map(state => [state, s.counts[state] ?? 0]))
  return {
    project: s.project,
    counts: { created: 0, retrying: 0, processing: 0, succeed: 0, failed: 0, stopped: 0, ...counts },
    countsComplete: s.countsComplete,
    due: s.due,
    dueAtPausedTargets: s.duePaused,
    oldestDueAgeSeconds: s.oldestDueAgeSeconds,
    failedLast24h: s.failedRecent,
    failedLast24hCapped: s.failedRecent >= FAILED_COUNT_CAP,
    lastProgressAt: iso(s.progressedAt),
    lastProgressAgeSeconds: s.progressedAt ? Math.max(0, (s.now.getTime() - s.progressedAt.getTime()) / 1000) : null,
  }
}

const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString())
