import { ValidationError } from '../errors.js'

/** Thrown for a request that cannot be written; each problem names the field (and the event index). Nothing was written. */
export class EnqueueValidationError extends ValidationError {
  override name = 'EnqueueValidationError'
  constructor(problems: string[]) {
    super('enqueue request', problems)
  }
}
