import { z } from 'zod'
import type { BulkFilter } from '../db/operator.js'
import { retryMany } from '../operate/retry.js'
import { stopMany } from '../operate/stop.js'
import { MAX_BULK_EVENTS } from '../schema/limits.js'
import { printDocument } from './json.js'
import { UsageError, type EventsContext, type Io } from './usage.js'
import { reportWake } from './wake.js'

export const BULK_USAGE = `  events retry|stop --project P [--target T] [--state failed|retrying] [--since T1] [--until T2] [--limit N]
                                            bulk form, one statement: every matching event of project
                                            P (state failed unless --state retrying), oldest first,
                                            created at or after T1 and before T2 (ISO 8601 date or date-
                                            time with a zone, bounds on created_at); retry then sends
                                            one wake-up signal. Prints how many events changed and
                                            how many it skipped (claimed meanwhile)`

/** The flags of the bulk forms, as parseArgs options. */
export const BULK_OPTIONS = {
  project: { type: 'string' },
  target: { type: 'string' },
  state: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
} as const

export type BulkValues = { [K in keyof typeof BULK_OPTIONS]?: string | undefined } & { limit?: string | undefined }

const stateSchema = z.enum(['failed', 'retrying'])
// A zone is required: a bare local time would mean whatever the operator's shell thinks it means.
const timeSchema = z.union([z.iso.datetime({ offset: true }), z.iso.date()])

/** `events retry|stop --project P …`: one statement, then (retry only) one signal for the project. */
export async function bulkCommand(ctx: EventsContext, sub: 'retry' | 'stop', values: BulkValues, io: Io): Promise<number> {
  const filter = parseFilter(sub, values)
  const deps = { db: ctx.pool, signals: sub === 'retry' ? ctx.signals() : undefined }
  const result = sub === 'retry' ? await retryMany(deps, filter) : { ...(await stopMany(deps, filter)), signal: undefined }
  const { changed, skipped, limitReached } = result
  const verb = sub === 'retry' ? 'made due now' : 'stopped'
  if (io.json) printDocument(io, { project: filter.project, state: filter.state, changed, skipped, limit: filter.limit, limitReached })
  else
    io.out(
      `${changed} ${filter.state} event(s) of ${filter.project} ${verb}${skipped ? `, ${skipped} skipped (changed meanwhile, e.g. claimed by a dispatcher)` : ''}${limitReached ? ` (limit ${filter.limit} reached: run again for the rest)` : ''}`,
    )
  return result.signal ? reportWake(result.signal, filter.project, io, 'retry', 'events') : 0
}

function parseFilter(sub: string, v: BulkValues): BulkFilter {
  if (!v.project) throw new UsageError(`events ${sub}: --project must not be empty`)
  if (v.target === '') throw new UsageError(`events ${sub}: --target must not be empty`)
  const state = stateSchema.safeParse(v.state ?? 'failed')
  if (!state.success) throw new UsageError('--state: expected failed or retrying')
  const since = parseTime('--since', v.since)
  const until = parseTime('--until', v.until)
  if (since && until && since >= until) throw new UsageError('--since must be before --until')
  return { project: v.project, target: v.target, state: state.data, since, until, limit: parseBulkLimit(v.limit) }
}

function parseTime(flag: string, given: string | undefined): Date | undefined {
  if (given === undefined) return undefined
  // The value is the operator's own; still, a long one is not echoed whole.
  if (!timeSchema.safeParse(given).success)
    throw new UsageError(
      `${flag}: expected an ISO 8601 date (2024-05-01, UTC) or date-time with a zone (2024-05-01T12:00:00Z), got "${given.slice(0, 40)}"`,
    )
  return new Date(given)
}

function parseBulkLimit(given: string | undefined): number {
  if (given === undefined) return MAX_BULK_EVENTS
  const parsed = z.coerce.number().int().positive().max(MAX_BULK_EVENTS).safeParse(given)
  if (!parsed.success) throw new UsageError(`--limit: expected a positive integer up to ${MAX_BULK_EVENTS}`)
  return parsed.data
}
