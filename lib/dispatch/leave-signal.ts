import { hasDueEvents, msUntilNextDue } from '../db/due.js'
import type { Deps } from '../deps.js'
import type { Logger } from '../log.js'
import { MAX_DELAY_SECONDS } from '../signals.js'

/** Why a drain stopped: nothing due, out of time, or its slice used up. */
export type DrainStop = 'idle' | 'time' | 'slice'

/** The signal a drain left behind: none, a continuation now, or one delayed to the next retry. */
export type LeftSignal = 'none' | 'continue' | { delaySeconds: number }

/**
 * Delay of the signal left by a drain that stopped for time without moving anything: an immediate one
 * would start the same fruitless drain again at once, forever (a target no invocation can hold). Short,
 * because the usual cause is an invocation that reached this project late and a fresh one will fit.
 */
const NO_PROGRESS_DELAY_SECONDS = 5

/**
 * The signal that keeps the project moving after this drain; a failure to send is logged, the sweeper
 * covers it. Events of `held` targets are not work a signal could move. A drain that moved nothing
 * never asks for an immediate successor.
 */
export async function leaveSignal(
  deps: Deps,
  project: string,
  { stop, progressed, held }: { stop: DrainStop; progressed: boolean; held: readonly string[] },
  log: Logger,
): Promise<LeftSignal> {
  try {
    if (stop !== 'idle') {
      if (!(await hasDueEvents(deps.db, project, held))) return 'none'
      if (!progressed) {
        await deps.signals.send(project, NO_PROGRESS_DELAY_SECONDS)
        return { delaySeconds: NO_PROGRESS_DELAY_SECONDS }
      }
      await deps.signals.send(project)
      return 'continue'
    }
    const ms = await msUntilNextDue(deps.db, project, held)
    if (ms === undefined || ms > MAX_DELAY_SECONDS * 1000) return 'none'
    // At least a second: an event due now but claimed elsewhere must not start a hot loop of wake-ups.
    const delaySeconds = Math.max(1, Math.ceil(ms / 1000))
    await deps.signals.send(project, delaySeconds)
    return { delaySeconds }
  } catch (error) {
    log.error('Could not leave a signal for the rest of the work; the sweeper will pick it up', { error })
    return 'none'
  }
}
