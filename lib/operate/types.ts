// What every operator verb gets and gives back. The verbs live here (lib/operate/), one file each:
// each checks its rule, calls its statements, emits what it emits and signals, and the doors (the
// CLI, REST, GraphQL, and the console through REST) only translate their input and its result.
import type { Queryable } from '../db/pool.js'
import type { Signals } from '../signals.js'

/** A verb's dependencies: the database, and the signal queue when the caller has one (a CLI may not). */
export type OperatorDeps = { db: Queryable; signals: Signals | undefined }

/**
 * Whether the project's wake-up signal went out after a change that made events due. The change is
 * committed first, so a signal that could not be sent costs only latency (the sweeper re-drives due
 * events within a minute): `failed` carries the error for the door to report, `none` says no signal
 * was due (nothing changed) or no queue was configured.
 */
export type SignalOutcome = { sent: true } | { sent: false; why: 'none' | 'no-queue' } | { sent: false; why: 'failed'; error: unknown }

/** Sends `project` its one wake-up signal, never throwing: the outcome says what happened. */
export async function wakeProject(signals: Signals | undefined, project: string): Promise<SignalOutcome> {
  if (!signals) return { sent: false, why: 'no-queue' }
  try {
    await signals.send(project)
    return { sent: true }
  } catch (error) {
    return { sent: false, why: 'failed', error }
  }
}
