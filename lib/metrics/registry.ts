import { Counter, Gauge, Histogram, Registry } from 'prom-client'

/** The one label every per-project series carries. Never a URL, a target or an event id. */
export const PROJECT_LABEL = 'contember_project'
type ProjectLabel = typeof PROJECT_LABEL

/** Pushgateway job of per-environment counters; each environment adds its own `instance`. */
export const COUNTERS_JOB = 'contember_actions'
/** Pushgateway job of the sweeper's heartbeat and backlog gauges (pushed with replace semantics). */
export const SWEEPER_JOB = 'contember_actions_sweeper'

/** Counters and histograms one execution environment accumulates and pushes. */
export type Metrics = ReturnType<typeof createMetrics>

/**
 * Builds the registry with the seed's metric names and help texts, plus this project's additions.
 * Every help text states its unit (events, attempts, drains, targets, pushes, spans, seconds).
 */
export function createMetrics() {
  const registry = new Registry()
  const registers = [registry]
  const labelNames: ProjectLabel[] = [PROJECT_LABEL]
  const counter = (name: string, help: string) => new Counter({ registers, labelNames, name, help })
  const eventsEnqueued = counter(
    'contember_actions_events_enqueued_total',
    'Total number of action events written to the queue (inflow), by contember_project.',
  )
  const eventsSucceeded = counter(
    'contember_actions_events_succeeded_total',
    'Total number of action events delivered successfully, by contember_project.',
  )
  const deliveryAttemptsFailed = counter(
    'contember_actions_delivery_attempts_failed_total',
    'Total number of failed webhook delivery attempts (including attempts that will be retried), by contember_project.',
  )
  const eventsFailed = counter(
    'contember_actions_events_failed_total',
    'Total number of action events that reached a terminal failed state (retries exhausted or unknown target), by contember_project.',
  )
  const workerCrashed = counter(
    'contember_actions_worker_crashed_total',
    'Total number of drains of a contember_project that dispatch abandoned on an error (count; SQS redelivers the signal, the sweeper re-drives the events). Invocations killed by a Lambda timeout or out of memory cannot count themselves.',
  )
  const deliveryDuration = new Histogram({
    registers,
    labelNames,
    name: 'contember_actions_delivery_duration_seconds',
    help: 'Duration of webhook delivery requests (one per batch) in seconds, by contember_project.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  })
  const pushFailures = new Counter({
    registers,
    name: 'contember_actions_metrics_push_failed_total',
    help: "Total number of failed pushes of this environment's metrics to the Pushgateway (pushed with the next successful one).",
  })
  const traceSpansDropped = new Counter({
    registers,
    name: 'contember_actions_trace_spans_dropped_total',
    help: 'Total number of trace spans this environment ended that the OTLP collector never took (spans; it did not answer within TRACES_FLUSH_TIMEOUT_MS, refused them, or the queue was full).',
  })
  const targetsHeld = counter(
    'contember_actions_targets_held_total',
    'Total number of targets a drain held back, one per target and drain (the target breaks a limit of the stored schema or its timeout does not fit the invocation; its events wait, unclaimed), by contember_project.',
  )
  const counters = { eventsEnqueued, eventsSucceeded, deliveryAttemptsFailed, eventsFailed, workerCrashed }
  return { registry, forProject: projectView(counters, targetsHeld, deliveryDuration), pushFailures, traceSpansDropped, counters }
}

type ProjectCounter = Counter<ProjectLabel>

/** The per-project recorders over the registry's series, so call sites never repeat the label. */
function projectView(
  c: Record<'eventsEnqueued' | 'eventsSucceeded' | 'deliveryAttemptsFailed' | 'eventsFailed' | 'workerCrashed', ProjectCounter>,
  targetsHeld: ProjectCounter,
  deliveryDuration: Histogram<ProjectLabel>,
) {
  return (project: string) => {
    const labels = { [PROJECT_LABEL]: project }
    // Zero increments would create a series with value 0 for every project touched; the seed avoids that.
    const add = (counter: ProjectCounter) => (n: number) => {
      if (n > 0) counter.inc(labels, n)
    }
    return {
      enqueued: add(c.eventsEnqueued),
      succeeded: add(c.eventsSucceeded),
      deliveryAttemptFailed: add(c.deliveryAttemptsFailed),
      failed: add(c.eventsFailed),
      crashed: () => c.workerCrashed.inc(labels, 1),
      deliveryDuration: (seconds: number) => deliveryDuration.observe(labels, seconds),
      targetsHeld: add(targetsHeld),
    }
  }
}

/** Per-project metrics view, so call sites never repeat the label. */
export type ProjectMetrics = ReturnType<Metrics['forProject']>

/** The sweeper's gauges, in a registry of their own that it pushes with replace semantics. */
export function createSweeperGauges() {
  const registry = new Registry()
  const gauge = <L extends string>(name: string, labelNames: readonly L[], help: string) =>
    new Gauge<L>({ registers: [registry], labelNames, name, help })
  const heartbeat = gauge(
    'contember_actions_worker_heartbeat_timestamp_seconds',
    [PROJECT_LABEL],
    'Unix timestamp in seconds, per contember_project, written by the sweeper: its pass time while nothing has been due for over a minute, otherwise the last time dispatch recorded an outcome for the project; stale means work waits and dispatch is stuck or dead.',
  )
  const dueEvents = gauge(
    'contember_actions_due_events',
    [PROJECT_LABEL, 'state'],
    'Number of events due for delivery now (exact, counted by the sweeper), by contember_project and state.',
  )
  const oldestDueAge = gauge(
    'contember_actions_oldest_due_event_age_seconds',
    [PROJECT_LABEL],
    'Age in seconds of the oldest event due for delivery (time since it became due), by contember_project.',
  )
  const failedEvents = gauge(
    'contember_actions_failed_events',
    [PROJECT_LABEL],
    'Number of events in the terminal failed state, awaiting an operator (exact, counted by the sweeper), by contember_project.',
  )
  // Series only while paused (replace semantics drop a resumed target's series): `target` is a name
  // from the schema, bounded by the number of targets, never a URL.
  const targetPaused = gauge(
    'contember_actions_target_paused',
    [PROJECT_LABEL, 'target'],
    'Paused targets: 1 while the target is paused by its circuit breaker, as misconfigured or by an operator (a flag; no series otherwise), by contember_project and target.',
  )
  const targetGone = gauge(
    'contember_actions_target_gone',
    [PROJECT_LABEL, 'target'],
    'Gone targets: 1 while the target is paused as misconfigured (a redirect, 401, 403, 404, 410 or the like, a refused destination, a certificate that does not verify) (a flag; no series otherwise), by contember_project and target.',
  )
  // A paused target's events wait for a probe or an operator, not dispatch: left out of the due gauges
  // and counted here, by why it is paused (down: probed; misconfigured: needs an operator; operator).
  const pausedEvents = gauge(
    'contember_actions_paused_target_events',
    [PROJECT_LABEL, 'target', 'reason'],
    'Number of events waiting on a paused target (a series only while paused), by contember_project, target and reason (down, misconfigured, operator).',
  )
  const pausedOldestAge = gauge(
    'contember_actions_paused_target_oldest_event_age_seconds',
    [PROJECT_LABEL, 'target', 'reason'],
    'Age in seconds of the oldest event waiting on a paused target (time since it became due), by contember_project, target and reason (down, misconfigured, operator).',
  )
  return { registry, heartbeat, dueEvents, oldestDueAge, failedEvents, targetPaused, targetGone, pausedEvents, pausedOldestAge }
}

export type SweeperGauges = ReturnType<typeof createSweeperGauges>
