import type pg from 'pg'
import { z } from 'zod'
import { getEvent, listEvents, retryEvent, stopEvent, type Listing } from '../db/operator.js'
import type { EventRow } from '../db/events.js'
import type { Io } from './main.js'

export const EVENTS_USAGE = `  events failed|processing|due <project> [--limit N]
                                            list events (default limit 50)
  events show <id>                          print one event with its log
  events retry <id>                         make an event due now (created if never attempted, else retrying)
  events stop <id>                          stop an event for good`

/** A mistake in the command line; main() prints it with the usage text. */
export class EventsUsageError extends Error {
  override name = 'UsageError'
}

/** `actions events …`: the operator's view of the queue. */
export async function eventsCommand(pool: pg.Pool, args: string[], io: Io): Promise<void> {
  const [sub, arg, ...rest] = args
  if (!arg) throw new EventsUsageError(`events ${sub ?? ''}: missing argument`)
  switch (sub) {
    case 'failed':
    case 'processing':
    case 'due': {
      const limit = parseLimit(rest)
      const rows = await listEvents(pool, arg, sub satisfies Listing, limit)
      for (const row of rows) io.out(summary(row))
      io.out(`${rows.length} ${sub} event(s)${rows.length === limit ? ` (limit ${limit})` : ''}`)
      return
    }
    case 'show': {
      const row = await getEvent(pool, uuid(arg))
      if (!row) throw new Error(`no event ${arg}`)
      io.out(JSON.stringify(row, null, 2))
      return
    }
    case 'retry':
      if (!(await retryEvent(pool, uuid(arg)))) throw new Error(`no event ${arg}`)
      io.out(`event ${arg} is due now`)
      return
    case 'stop':
      if (!(await stopEvent(pool, uuid(arg)))) throw new Error(`no event ${arg}`)
      io.out(`event ${arg} stopped`)
      return
    default:
      throw new EventsUsageError(`events: unknown subcommand "${sub ?? ''}"`)
  }
}

function parseLimit(rest: string[]): number {
  const i = rest.indexOf('--limit')
  if (i < 0) return 50
  const parsed = z.coerce.number().int().positive().max(10_000).safeParse(rest[i + 1])
  if (!parsed.success) throw new EventsUsageError('--limit: expected a positive integer up to 10000')
  return parsed.data
}

function uuid(id: string): string {
  if (!z.uuid().safeParse(id).success) throw new EventsUsageError(`expected an event id (uuid), got "${id}"`)
  return id
}

function summary(r: EventRow): string {
  const last = r.log.at(-1)
  const error = typeof last === 'object' && last !== null && 'errorMessage' in last ? ` ${String(last.errorMessage)}` : ''
  return `${r.id} ${r.state} target=${r.target} trigger=${r.trigger} attempts=${r.num_retries} due=${r.visible_at.toISOString()}${error}`
}
