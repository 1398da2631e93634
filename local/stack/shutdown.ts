// How the local stack stops: what each part registered, undone in reverse, each step bounded.
import type { Context } from 'aws-lambda'

/** Steps that undo what the stack started, in start order; stopping runs them last first. */
export type Cleanups = Array<() => Promise<void>>

/** Runs every cleanup, last registered first; one that fails does not keep the others from running. */
export async function runCleanups(cleanups: Cleanups): Promise<void> {
  for (const c of cleanups.reverse()) await c().catch(() => {})
}

/** Waits for `work` at most `ms`; true when it settled in time. */
export async function within(ms: number, work: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const done = await Promise.race([
    work.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>(resolve => {
      timer = setTimeout(() => resolve(false), ms)
    }),
  ])
  clearTimeout(timer)
  return done
}

/** A context whose remaining time drops to zero once `stop()` holds, as a Lambda near its timeout. */
export function cutShortWhen(stop: () => boolean, context: Context): Context {
  const remaining = context.getRemainingTimeInMillis
  return { ...context, getRemainingTimeInMillis: () => (stop() ? 0 : remaining()) }
}
