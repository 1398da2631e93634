import { wakeProject, type SignalOutcome } from '../operate/types.js'
import type { Signals } from '../signals.js'
import { say } from './json.js'
import type { Io } from './usage.js'

/**
 * Reports the wake-up signal an operator verb sent after its change was committed (retry), as
 * upstream notifies its dispatcher. The change stands whatever happened: without a queue, or with a
 * failed signal, the sweeper re-drives due events within a minute. Returns the exit code: 0, or 1
 * when the signal failed. `change` and `what` name the change and what it made due, for the messages.
 */
export function reportWake(outcome: SignalOutcome, project: string, io: Io, change: string, what: string): number {
  if (outcome.sent) {
    // With --json a script reads the change's document on stdout and this outcome in the exit code.
    say(io, `signalled project ${project}`)
    return 0
  }
  if (outcome.why !== 'failed') {
    if (outcome.why === 'no-queue')
      io.err(`no wake-up signal sent (SIGNAL_QUEUE_URL is not set); the sweeper picks the ${what} up within a minute`)
    return 0
  }
  const e = outcome.error
  io.err(
    `the ${change} stands, but the wake-up signal failed (${e instanceof Error ? e.message : 'error'}); the sweeper picks the ${what} up within a minute`,
  )
  return 1
}

/** Sends `project` its wake-up signal after a change (resume) and reports it as {@link reportWake} does. */
export async function wake(signals: Signals | undefined, project: string, io: Io, change: string, what: string): Promise<number> {
  return reportWake(await wakeProject(signals, project), project, io, change, what)
}
