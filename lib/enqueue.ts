import type { Deps } from './deps.js'
import { enqueueWithin, type EnqueueResult } from './enqueue/within.js'

// The enqueue Lambda's path. Producers that hold their own Postgres transaction call enqueueWithin
// (lib/enqueue/within.ts), then signalAfterCommit; both share one validation and one insert.

/** Validates the whole request, writes its events in one statement, then signals the project's queue. */
export async function enqueue(deps: Deps, input: unknown): Promise<EnqueueResult> {
  const { project, ...result } = await enqueueWithin(deps.db, input)
  deps.metrics.forProject(project).enqueued(result.written)
  if (result.eventIds.length > 0) {
    try {
      await deps.signals.send(project)
    } catch (error) {
      // The events are committed; the sweeper re-drives them within a minute.
      deps.log.error('Could not signal the dispatch queue; the sweeper will pick the events up', { project, events: result.written, error })
    }
  }
  return result
}
