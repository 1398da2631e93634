import type pg from 'pg'
import type { Io } from './main.js'

export const EVENTS_USAGE = ''

/** Operator commands over events; filled in by the dispatch work. */
export async function eventsCommand(_pool: pg.Pool, _args: string[], _io: Io): Promise<void> {
  throw new Error('events commands are not available yet')
}
