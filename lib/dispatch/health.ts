import type { RecordedRow } from '../db/record.js'
import type { Logger } from '../log.js'

/**
 * Logs the circuit breaker's transitions among recorded rows, once per target: paused (why), resumed.
 * The logger carries the project; the target is named, never its URL. Returns the targets paused
 * (with why) and resumed.
 */
export function targetHealthChanges(
  rows: readonly RecordedRow[],
  log: Logger,
): { paused: Array<[string, NonNullable<RecordedRow['target_paused']>]>; resumed: string[] } {
  const paused = new Map<string, NonNullable<RecordedRow['target_paused']>>()
  const resumed = new Set<string>()
  for (const row of rows) {
    if (row.target_paused) paused.set(row.target, row.target_paused)
    else if (row.target_resumed) resumed.add(row.target)
  }
  for (const [target, reason] of paused) {
    if (reason === 'gone')
      log.error('Webhook target answered 410 Gone: paused until an operator resumes it; its events wait', { target, reason })
    else if (reason === 'misconfigured')
      log.error('Webhook target is misconfigured (see targets list): paused until an operator resumes it; its events wait', {
        target,
        reason,
      })
    else log.warn('Webhook target paused after failing: its events wait, a probe batch tests it at growing intervals', { target, reason })
  }
  for (const target of resumed) log.info('Webhook target resumed: a delivery succeeded, its events drain again', { target })
  return { paused: [...paused], resumed: [...resumed] }
}
