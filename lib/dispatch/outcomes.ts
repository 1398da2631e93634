import type { Context } from '@opentelemetry/api'
import { LEASE_EXPIRED, type ClaimResult } from '../db/claim.js'
import type { AttemptRecord, RecordedRow } from '../db/record.js'
import type { ClaimedEvent, Outcome } from '../events.js'
import { deliver } from '../delivery/webhook.js'
import type { Deps } from '../deps.js'
import type { Logger } from '../log.js'
import type { ProjectMetrics } from '../metrics/registry.js'
import { excerpt } from '../text.js'
import type { Claimed } from './queued-claims.js'
import { webhookSpan } from './webhook-span.js'

/** What a drain did to its events, counted as their outcomes are recorded. */
export type Tally = {
  succeeded: number
  retried: number
  failedAfterAttempt: number
  failedUnknownTarget: number
  batches: number
}

/** One line per delivered batch (the local stack prints it). */
export type BatchReport = { project: string; target: string; events: number; succeeded: number; durationMs: number }

export type BatchDelivery = {
  deps: Pick<Deps, 'http' | 'tracing'>
  project: string
  claimed: Claimed
  log: Logger
  metrics: ProjectMetrics
  onBatch?: ((batch: BatchReport) => void) | undefined
  /** The drain's span (tracing on): the webhook span's parent. */
  trace?: Context | undefined
}

/** Delivers one claimed batch and returns its attempt records, one per event; never throws for target trouble. */
export async function deliverBatch({
  deps,
  project,
  claimed: { batch, target },
  log,
  metrics,
  onBatch,
  trace,
}: BatchDelivery): Promise<AttemptRecord[]> {
  let outcomes: Map<string, Outcome>
  let durationMs = 0
  try {
    // With tracing on, the request runs in a `webhook` client span (lib/dispatch/webhook-span.ts).
    const delivery = deps.tracing.enabled
      ? await webhookSpan(deps.tracing, { endpoint: target, events: batch.events, log, parent: trace }, (spanLog, headers) =>
          deliver(deps.http, target, batch.events, spanLog, headers),
        )
      : await deliver(deps.http, target, batch.events, log)
    outcomes = delivery.outcomes
    durationMs = delivery.durationMs
    metrics.deliveryDuration(durationMs / 1000)
  } catch (error) {
    // A bug, not target trouble: the attempt still counts, as upstream does, so the event cannot loop forever.
    // Logged by name only: a message built from our own state (a URL, a header, a value) may hold a secret.
    log.error('Delivery failed with an internal error', {
      target: target.name,
      errorName: error instanceof Error ? error.name : typeof error,
    })
    outcomes = new Map(batch.events.map(e => [e.id, { ok: false, errorMessage: 'Internal error' }]))
  }
  // A batch that failed as a whole may hold one bad event: its events travel in halves next time.
  const half = Math.ceil(batch.events.length / 2)
  const records = batch.events.map((e: ClaimedEvent): AttemptRecord => {
    const outcome = outcomes.get(e.id) ?? { ok: false, errorMessage: 'Internal error' }
    return {
      id: e.id,
      lease: e.lease,
      project,
      target: target.name,
      attempts: e.num_retries,
      outcome,
      durationMs,
      maxAttempts: target.maxAttempts,
      initialRepeatIntervalMs: target.initialRepeatIntervalMs,
      ...(!outcome.ok && outcome.wholeBatch && batch.events.length > 1 ? { splitTo: half } : {}),
    }
  })
  onBatch?.({ project, target: target.name, events: records.length, succeeded: records.filter(r => r.outcome.ok).length, durationMs })
  return records
}

/**
 * How long a receiver asked to be left alone (a Retry-After on 429 or 503, the longest in the batch),
 * capped at `capMs`, in ms from now; undefined when it did not ask. A date in the past asks for nothing.
 */
export function retryAfterMs(records: readonly AttemptRecord[], capMs: number): number | undefined {
  let longest: number | undefined
  for (const r of records) {
    const ra = r.outcome.ok ? undefined : r.outcome.retryAfter
    if (!ra) continue
    const ms = 'delayMs' in ra ? ra.delayMs : ra.at.getTime() - Date.now()
    if (ms > 0) longest = Math.max(longest ?? 0, Math.min(ms, capMs))
  }
  return longest
}

/** Counts recorded outcomes into the tally and the metrics; logs each event that failed for good. */
export function countRecorded(
  rows: RecordedRow[],
  records: ReadonlyMap<string, AttemptRecord>,
  tally: Tally,
  metrics: ProjectMetrics,
  log: Logger,
): void {
  let succeeded = 0
  let retried = 0
  let failed = 0
  for (const row of rows) {
    if (row.state === 'succeed') succeeded++
    else if (row.state === 'retrying') retried++
    else {
      failed++
      const outcome = records.get(row.id)?.outcome
      log.error('Action event failed permanently, no attempts left', {
        eventId: row.id,
        target: row.target,
        trigger: row.trigger,
        attempts: row.num_retries,
        code: outcome && !outcome.ok ? outcome.code : undefined,
        // Receiver text (a reason phrase, `failures[].error`), already redacted: a log line quotes an excerpt only.
        errorMessage: outcome && !outcome.ok ? excerpt(outcome.errorMessage) : undefined,
      })
    }
  }
  tally.succeeded += succeeded
  tally.retried += retried
  tally.failedAfterAttempt += failed
  metrics.succeeded(succeeded)
  metrics.deliveryAttemptFailed(retried + failed)
  metrics.failed(failed)
}

/**
 * Counts and logs what the claim failed or counted: events whose target is not in the schema, events
 * whose lost attempt (a lease that ran out unrecorded) was their last, and every lost attempt.
 */
export function failedByClaim(
  { unknownTarget, spent, lost }: Pick<ClaimResult, 'unknownTarget' | 'spent' | 'lost'>,
  tally: Tally,
  metrics: ProjectMetrics,
  log: Logger,
): void {
  for (const row of unknownTarget) {
    // Never retried: the schema has to name the target again before such an event can be delivered.
    log.error('Action event failed permanently, its target is not in the schema', {
      eventId: row.id,
      target: row.target,
      trigger: row.trigger,
    })
  }
  for (const row of spent) {
    log.error('Action event failed permanently, no attempts left', {
      eventId: row.id,
      target: row.target,
      trigger: row.trigger,
      attempts: row.num_retries,
      errorMessage: LEASE_EXPIRED,
    })
  }
  if (lost > 0)
    log.warn('Counted attempts whose lease ran out before they were recorded', { attempts: lost, failedPermanently: spent.length })
  tally.failedUnknownTarget += unknownTarget.length
  tally.failedAfterAttempt += spent.length
  metrics.deliveryAttemptFailed(lost)
  metrics.failed(unknownTarget.length + spent.length)
}
