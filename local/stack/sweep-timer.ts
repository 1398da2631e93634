// The sweeper's timer: a pass right away, then one every interval, never two at once.
import type { Logger } from '../../lib/log.js'
import type { Cleanups } from './shutdown.js'

/** Starts the timer; stopping clears it and waits for a pass under way. */
export function startSweepTimer(sweep: () => Promise<unknown>, intervalMs: number, log: Logger, cleanups: Cleanups): void {
  let sweeping: Promise<unknown> | undefined
  const tick = () => {
    sweeping ??= sweep()
      .catch(error => log.error('Sweeper invocation failed', { error }))
      .finally(() => {
        sweeping = undefined
      })
  }
  const timer = setInterval(tick, intervalMs)
  // A first pass right away re-drives whatever a restart left due (signals do not survive one).
  tick()
  cleanups.push(async () => {
    clearInterval(timer)
    await sweeping
  })
}
