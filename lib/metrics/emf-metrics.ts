// The catalogue of EMF metrics: data, kept apart from the writer in emf.ts.

/**
 * What this engine writes as CloudWatch Embedded Metric Format lines (when `CLOUDWATCH_METRICS` is
 * on), so docs/operations.md's table and the tests hold the writer to one list.
 *
 * - `delta`: what a Prometheus counter of this execution environment gained during the invocation;
 *   CloudWatch adds the lines up, so use `Sum` per period for rates.
 * - `values`: every observation of the invocation (one per delivered batch), so all statistics and
 *   percentiles are real.
 * - `absolute`: the sweeper's exact gauges, written every pass for every active project (zeros
 *   included), so missing data on them means the sweeper is not running; except the paused-target
 *   gauges, written only while a target is paused. The heartbeat is written as its age at the
 *   pass (CloudWatch alarms cannot compare a timestamp with "now").
 *
 * Every document also carries the `service` dimension and, deployed, `stage` (Powertools' model), and each metric is
 * written twice: under its own dimensions and as a rollup under `service` (and `stage`) alone (plus
 * `Reason` where it has one), which is what the template's alarms read (serverless.yml).
 */
export const EMF_METRICS = [
  {
    name: 'EventsEnqueued',
    source: 'contember_actions_events_enqueued_total',
    kind: 'delta',
    unit: 'Count',
    dimensions: ['Project'],
    statistic: 'Sum',
    meaning: 'events written by enqueue',
  },
  {
    name: 'EventsSucceeded',
    source: 'contember_actions_events_succeeded_total',
    kind: 'delta',
    unit: 'Count',
    dimensions: ['Project'],
    statistic: 'Sum',
    meaning: 'events delivered (terminal)',
  },
  {
    name: 'DeliveryAttemptsFailed',
    source: 'contember_actions_delivery_attempts_failed_total',
    kind: 'delta',
    unit: 'Count',
    dimensions: ['Project'],
    statistic: 'Sum',
    meaning: 'failed delivery attempts, retried ones included',
  },
  {
    name: 'EventsFailed',
    source: 'contember_actions_events_failed_total',
    kind: 'delta',
    unit: 'Count',
    dimensions: ['Project'],
    statistic: 'Sum',
    meaning: 'events terminally failed (attempts exhausted or unknown target)',
  },
  {
    name: 'WorkerCrashed',
    source: 'contember_actions_worker_crashed_total',
    kind: 'delta',
    unit: 'Count',
    dimensions: ['Project'],
    statistic: 'Sum',
    meaning: 'dispatch invocations that crashed',
  },
  {
    name: 'TargetsHeld',
    source: 'contember_actions_targets_held_total',
    kind: 'delta',
    unit: 'Count',
    dimensions: ['Project'],
    statistic: 'Sum',
    meaning: 'targets a drain held back (a stored schema it cannot run, or no time left for its timeout)',
  },
  {
    name: 'MetricsPushFailed',
    source: 'contember_actions_metrics_push_failed_total',
    kind: 'delta',
    unit: 'Count',
    dimensions: [],
    statistic: 'Sum',
    meaning: 'failed pushes to the Pushgateway',
  },
  {
    name: 'TraceSpansDropped',
    source: 'contember_actions_trace_spans_dropped_total',
    kind: 'delta',
    unit: 'Count',
    dimensions: [],
    statistic: 'Sum',
    meaning: 'trace spans the OTLP collector never took',
  },
  {
    name: 'DeliveryDuration',
    source: 'contember_actions_delivery_duration_seconds',
    kind: 'values',
    unit: 'Seconds',
    dimensions: ['Project'],
    statistic: 'p99, Maximum, Average',
    meaning: 'duration of webhook delivery requests (one per batch)',
  },
  {
    name: 'HeartbeatAgeSeconds',
    source: 'contember_actions_worker_heartbeat_timestamp_seconds',
    kind: 'absolute',
    unit: 'Seconds',
    dimensions: ['Project'],
    statistic: 'Maximum',
    meaning: 'time since dispatch last made progress on a project with due events (0 while nothing is due)',
  },
  {
    name: 'DueEvents',
    source: 'contember_actions_due_events',
    kind: 'absolute',
    unit: 'Count',
    dimensions: ['Project', 'State'],
    statistic: 'Maximum',
    meaning: 'events due for delivery now, counted by the sweeper',
  },
  {
    name: 'OldestDueEventAgeSeconds',
    source: 'contember_actions_oldest_due_event_age_seconds',
    kind: 'absolute',
    unit: 'Seconds',
    dimensions: ['Project'],
    statistic: 'Maximum',
    meaning: 'age of the oldest due event (time since it became due)',
  },
  {
    name: 'FailedEvents',
    source: 'contember_actions_failed_events',
    kind: 'absolute',
    unit: 'Count',
    dimensions: ['Project'],
    statistic: 'Maximum',
    meaning: 'events in the terminal failed state, awaiting an operator',
  },
  {
    name: 'TargetPaused',
    source: 'contember_actions_target_paused',
    kind: 'absolute',
    unit: 'Count',
    dimensions: ['Project', 'Target'],
    statistic: 'Maximum',
    meaning: '1 while a target is paused (written only while paused: missing data means running)',
  },
  {
    name: 'TargetGone',
    source: 'contember_actions_target_gone',
    kind: 'absolute',
    unit: 'Count',
    dimensions: ['Project', 'Target'],
    statistic: 'Maximum',
    meaning: '1 while a target is paused as misconfigured and waits for an operator (written only then)',
  },
  {
    name: 'PausedTargetEvents',
    source: 'contember_actions_paused_target_events',
    kind: 'absolute',
    unit: 'Count',
    dimensions: ['Project', 'Target', 'Reason'],
    statistic: 'Maximum',
    meaning: 'events waiting on a paused target, by why it is paused (down, misconfigured, operator)',
  },
  {
    name: 'PausedTargetOldestEventAgeSeconds',
    source: 'contember_actions_paused_target_oldest_event_age_seconds',
    kind: 'absolute',
    unit: 'Seconds',
    dimensions: ['Project', 'Target', 'Reason'],
    statistic: 'Maximum',
    meaning: 'age of the oldest event waiting on a paused target',
  },
] as const

export type EmfUnit = (typeof EMF_METRICS)[number]['unit']
