/** Thrown for a request that cannot be written; each problem names the field (and the event index). Nothing was written. */
export class EnqueueValidationError extends Error {
  override name = 'EnqueueValidationError'
  constructor(readonly problems: string[]) {
    super(`Invalid enqueue request:\n${problems.map(p => `  - ${p}`).join('\n')}`)
  }
}
