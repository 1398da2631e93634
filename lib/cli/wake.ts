import type { Signals } from '../signals.js'
import { say } from './json.js'
import type { Io } from './usage.js'

/**
 * Sends a project its wake-up signal after an operator's change was committed (retry, resume), as
 * upstream notifies its dispatcher. The change stands whatever happens here: without a queue, or
 * with a failed signal, the sweeper re-drives due events within a minute. Returns the exit code:
 * 0, or 1 when the signal failed. `change` and `what` name the change and what it made due, for the messages.
 */
export async function wake(signals: Signals | undefined, project: string, io: Io, change: string, what: string): Promise<number> {
  if (!signals) {
    io.err(`no wake-up signal sent (SIGNAL_QUEUE_URL is not set); the sweeper picks the ${what} up within a minute`)
    return 0
  }
  try {
    await signals.send(project)
  } catch (e) {
    io.err(
      `the ${change} stands, but the wake-up signal failed (${e instanceof Error ? e.message : 'error'}); the sweeper picks the ${what} up within a minute`,
    )
    return 1
  }
  // With --json a script reads the change's document on stdout and this outcome in the exit code.
  say(io, `signalled project ${project}`)
  return 0
}
