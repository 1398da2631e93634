// Deadlines of in-flight requests on one timer: an AbortController and a setTimeout per request cost
// more than the POST itself at one event per request (bench/README.md, issue 14). The timer is armed
// for the earliest deadline only; deliveries mostly share one timeout, so adding a later deadline
// leaves it alone.
import { EventEmitter } from 'node:events'

/** One request's deadline. `signal` emits `abort` when it passes (undici accepts an emitter as `signal`). */
export type Deadline = { readonly signal: EventEmitter; readonly at: number; expired: boolean }

const live = new Set<Deadline>()
let timer: NodeJS.Timeout | undefined
let armedAt = Number.POSITIVE_INFINITY

/** Starts a deadline `ms` from now; pass it to {@link endDeadline} once the exchange is over, however it ended. */
export function startDeadline(ms: number): Deadline {
  const d: Deadline = { signal: new EventEmitter(), at: performance.now() + ms, expired: false }
  live.add(d)
  if (d.at < armedAt) arm(d.at)
  return d
}

/** Forgets a deadline; the timer stops once none is left, so an idle process holds no timer. */
export function endDeadline(d: Deadline): void {
  live.delete(d)
  if (live.size === 0 && timer) {
    clearTimeout(timer)
    timer = undefined
    armedAt = Number.POSITIVE_INFINITY
  }
}

function arm(at: number): void {
  if (timer) clearTimeout(timer)
  armedAt = at
  // Rounded up: a timer may fire a fraction of a millisecond early, which would only re-arm it.
  timer = setTimeout(sweep, Math.max(1, Math.ceil(at - performance.now())))
}

function sweep(): void {
  timer = undefined
  armedAt = Number.POSITIVE_INFINITY
  const now = performance.now()
  let next = Number.POSITIVE_INFINITY
  for (const d of live) {
    if (d.at <= now) {
      live.delete(d)
      d.expired = true
      d.signal.emit('abort')
    } else if (d.at < next) {
      next = d.at
    }
  }
  if (next < Number.POSITIVE_INFINITY) arm(next)
}
