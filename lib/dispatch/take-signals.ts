import type { Deps } from '../deps.js'
import type { DrainOptions } from './drain.js'
import { parseSignal } from './signal-body.js'

/** What a drain came to: undefined, or its project and the error it threw. */
export type DrainOutcome = readonly [string, unknown] | undefined

/** The drains of one invocation that may give up their places before they are done (lib/dispatch/projects.ts). */
export type YieldingDrains = {
  /** Starts a drain once few enough are finishing; resolves, when it gave up its place, to its outcome to come. `taken`: for a signal taken from the queue. */
  start(project: string, sliceMs: DrainOptions['sliceMs'], taken?: boolean): Promise<{ outcome: Promise<DrainOutcome> }>
  /** While a drain that gave up its place is still finishing (its requests in flight): a promise for when one ends. */
  finishing(): Promise<unknown> | undefined
  /** How many more drains may give up their places before a new one has to wait for one to end. */
  room(): number
  /** The signalled drains' outcomes, once every drain (taken ones too) is done: none may be in flight when the invocation returns. */
  outcomes(): Promise<DrainOutcome[]>
}

/**
 * How long an invocation waits for its drains' requests in flight before it takes signals
 * itself: requests to healthy receivers end well within it, so only a slow or hanging receiver makes
 * an invocation serve other projects (and a batch whose requests end quickly leaves its signals to
 * the event source, as before).
 */
export const TAKE_AFTER_MS = 250
/** How often a waiting invocation asks the queue again when it found nothing to take. */
export const TAKE_POLL_MS = 250
/** A taken signal's drain slice at most: short, so a project it takes yields soon to the next taken signal. */
export const TAKEN_SLICE_MS = 1_000
/** Taken signals stay hidden for the invocation's time left plus this, then come back if never deleted. */
const TAKEN_VISIBILITY_SLACK_S = 30

/**
 * While the only work left in an invocation is requests in flight to slow receivers (their drains
 * gave up their places), takes waiting signals from the queue and drains their projects, as a free
 * invocation would: a hanging receiver then holds its invocation's time, not its tenants' place in
 * the queue (the event source's maximumConcurrency). Goes on while any drain's requests are in flight
 * and the invocation's time allows (a drain only sends what fits in it); every drain it started
 * finishes before the invocation returns. A taken signal is deleted when its drain
 * ends without crashing; otherwise it comes back after its visibility timeout.
 */
export async function serveTakenSignals(deps: Deps, opts: DrainOptions, drains: YieldingDrains, parallel: number): Promise<void> {
  const { take, done } = deps.signals
  if (!take || !done) return
  const first = drains.finishing()
  if (!first || (await within(TAKE_AFTER_MS, first))) return
  for (let waiting = drains.finishing(); waiting; waiting = drains.finishing()) {
    if (opts.remainingMs() < 2 * deps.config.DISPATCH_TIME_MARGIN_MS) {
      await waiting
      continue
    }
    // A taken signal is hidden from every other invocation: take only what can start at once.
    const room = drains.room()
    if (room <= 0) {
      await waiting
      continue
    }
    const taken = await take(Math.min(10, room), opts.remainingMs() / 1000 + TAKEN_VISIBILITY_SLACK_S).catch((error: unknown) => {
      deps.log.warn('Could not take signals while waiting for requests in flight', { error })
      return []
    })
    if (taken.length === 0) {
      await within(TAKE_POLL_MS, waiting)
      continue
    }
    await serveTaken(deps, drains, parallel, taken)
  }
}

/** Drains the projects `taken` names, `parallel` at a time, and deletes each signal once its drain ended well. */
async function serveTaken(
  deps: Deps,
  drains: YieldingDrains,
  parallel: number,
  taken: ReadonlyArray<{ body: string; receipt: string }>,
): Promise<void> {
  const receipts = new Map<string, string[]>()
  const malformed: string[] = []
  for (const t of taken) {
    const project = parseSignal(t.body)
    if (project === undefined) malformed.push(t.receipt)
    else receipts.set(project, [...(receipts.get(project) ?? []), t.receipt])
  }
  const forget = (list: readonly string[]) =>
    deps.signals
      .done?.(list)
      .catch((error: unknown) => deps.log.warn('Could not delete taken signals; they come back and find less to do', { error }))
  // As the handler drops a malformed signal, a taken one is deleted rather than retried forever.
  if (malformed.length > 0) {
    deps.log.error('Dropped malformed dispatch signals', { count: malformed.length })
    void forget(malformed)
  }
  const projects = [...receipts.keys()]
  for (let i = 0; i < projects.length; i += parallel) {
    await Promise.all(
      projects.slice(i, i + parallel).map(async project => {
        const { outcome } = await drains.start(project, Math.min(TAKEN_SLICE_MS, deps.config.DISPATCH_PROJECT_SLICE_MS), true)
        void outcome.then(o => (o === undefined ? forget(receipts.get(project) ?? []) : undefined))
      }),
    )
  }
}

/** True when `p` settles within `ms`; never rejects. */
async function within(ms: number, p: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const settled = await Promise.race([
    p.then(
      () => true,
      () => true,
    ),
    new Promise<false>(resolve => {
      timer = setTimeout(() => resolve(false), ms)
    }),
  ])
  clearTimeout(timer)
  return settled
}
