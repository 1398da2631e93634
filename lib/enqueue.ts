import type { Deps } from './deps.js'
import { enqueueWithin, type EnqueueResult } from './enqueue/within.js'

// The enqueue Lambda's path, and the package's enqueue API: producers that hold their own Postgres
// transaction call enqueueWithin (then signalAfterCommit); both share one validation and one insert.
export { EnqueueValidationError } from './enqueue/errors.js'
export { enqueueRequestSchema, type EnqueueRequest } from './enqueue/request.js'
export { derivedId, enqueueWithin, signalAfterCommit, type EnqueueResult, type EnqueueWithinResult } from './enqueue/within.js'
export { MAX_EVENTS_PER_REQUEST } from './schema/limits.js'

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
