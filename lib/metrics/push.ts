import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import type { Registry } from 'prom-client'
import type { Logger } from '../log.js'
import { excerpt, LOGGED_EXCERPT_BYTES } from '../text.js'
import { COUNTERS_JOB, SWEEPER_JOB, type Metrics, type SweeperGauges } from './registry.js'

/** The settings a push reads, by their lib/config.ts names: passed in, so metrics never import the config module. */
export type PushSettings = {
  PUSHGATEWAY_URL?: string | undefined
  PUSHGATEWAY_TIMEOUT_MS: number
  METRICS_INSTANCE?: string | undefined
  AWS_LAMBDA_LOG_STREAM_NAME?: string | undefined
}

/** A grouping-key value unique to this execution environment: Lambda's log stream name, else host, pid and a nonce. */
export function environmentInstance(config: Pick<PushSettings, 'METRICS_INSTANCE' | 'AWS_LAMBDA_LOG_STREAM_NAME'>): string {
  return config.METRICS_INSTANCE ?? config.AWS_LAMBDA_LOG_STREAM_NAME ?? `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`
}

/** The Pushgateway path of a group; values are base64url-encoded so `/`, `[` and `$` in log stream names survive. */
export function groupPath(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([k, v]) => `/${k}@base64/${Buffer.from(v).toString('base64url') || '='}`)
    .join('')
}

/** Thrown when the Pushgateway refuses or does not answer in time; never escapes this wing (logged through ../errors.ts, which tells causes by name and code). */
export class PushError extends Error {
  override name = 'PushError'
}

/** Sends a registry to a group: `replace` (PUT) drops the group's other metrics, otherwise POST replaces same-named ones. */
export async function pushRegistry(
  baseUrl: string,
  registry: Registry,
  labels: Record<string, string>,
  opts: { replace: boolean; timeoutMs: number },
): Promise<void> {
  const body = await registry.metrics()
  let res: Response
  try {
    res = await fetch(baseUrl.replace(/\/$/, '') + '/metrics' + groupPath(labels), {
      method: opts.replace ? 'PUT' : 'POST',
      headers: { 'Content-Type': registry.contentType },
      body,
      signal: AbortSignal.timeout(opts.timeoutMs),
    })
  } catch (cause) {
    throw new PushError(`Pushgateway did not answer: ${cause instanceof Error ? cause.name : 'error'}`, { cause })
  }
  if (!res.ok) {
    // The Pushgateway's answer names the offending metric, which helps and holds no secret.
    throw new PushError(`Pushgateway answered ${res.status}: ${await head(res)}`)
  }
}

/**
 * The start of an error answer, cleaned for a log line: at most a log excerpt's bytes are read, the
 * rest of the body is cancelled unread, so an endpoint answering with a huge page costs nothing more.
 */
async function head(res: Response): Promise<string> {
  const reader = res.body?.getReader()
  if (!reader) return ''
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    while (size < LOGGED_EXCERPT_BYTES) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(value)
      size += value.length
    }
  } catch {
    // An answer that breaks off is still described by what arrived.
  } finally {
    await reader.cancel().catch(() => {})
  }
  return excerpt(Buffer.concat(chunks).toString('utf8'))
}

/** Deletes one group (the sweeper's stale-group cleanup). */
export async function deleteGroup(baseUrl: string, labels: Record<string, string>, timeoutMs: number): Promise<void> {
  let res: Response
  try {
    res = await fetch(baseUrl.replace(/\/$/, '') + '/metrics' + groupPath(labels), {
      method: 'DELETE',
      signal: AbortSignal.timeout(timeoutMs),
    })
    // The answer's body is not needed; reading it to the end frees the connection (within the same timeout).
    await res.arrayBuffer()
  } catch (cause) {
    throw new PushError(`Pushgateway did not answer a delete: ${cause instanceof Error ? cause.name : 'error'}`, { cause })
  }
  if (!res.ok && res.status !== 404) throw new PushError(`Pushgateway answered ${res.status} to a delete`)
}

export type CounterPusher = { push(log: Logger): Promise<void>; instance: string }

/**
 * Pushes this environment's cumulative counters under its own grouping key (pushAdd), so concurrent
 * environments never overwrite each other. A failure is logged (to the invocation's logger) and counted, never thrown.
 */
export function createCounterPusher(config: PushSettings, metrics: Metrics): CounterPusher {
  const instance = environmentInstance(config)
  return {
    instance,
    push: async log => {
      if (!config.PUSHGATEWAY_URL) return
      try {
        await pushRegistry(
          config.PUSHGATEWAY_URL,
          metrics.registry,
          { job: COUNTERS_JOB, instance },
          { replace: false, timeoutMs: config.PUSHGATEWAY_TIMEOUT_MS },
        )
      } catch (error) {
        metrics.pushFailures.inc()
        log.warn('Could not push metrics to the Pushgateway', { error })
      }
    },
  }
}

/** Pushes the sweeper's gauges under its own group with replace semantics. A failure is logged and counted, never thrown. */
export async function pushSweeperGauges(config: PushSettings, metrics: Metrics, gauges: SweeperGauges, log: Logger): Promise<void> {
  if (!config.PUSHGATEWAY_URL) return
  try {
    // Replace semantics: a project gone since the last pass loses its heartbeat series.
    await pushRegistry(
      config.PUSHGATEWAY_URL,
      gauges.registry,
      { job: SWEEPER_JOB },
      { replace: true, timeoutMs: config.PUSHGATEWAY_TIMEOUT_MS },
    )
  } catch (error) {
    metrics.pushFailures.inc()
    log.warn('Could not push sweeper gauges to the Pushgateway', { error })
  }
}

type PushgatewayGroup = { labels?: Record<string, string>; push_time_seconds?: { metrics?: Array<{ value?: string }> } }

export type StaleGroupOptions = {
  /** A counter group that has not pushed for this long belongs to a dead execution environment. */
  maxAgeSeconds: number
  /** Bound of each Pushgateway call (the listing, then each delete). */
  timeoutMs: number
  /** The caller's own group, never deleted. */
  ownInstance?: string | undefined
  /** Asked before each delete; false stops the cleanup (the rest waits for the next pass). */
  hasTime: () => boolean
}

/** Deletes counter groups of environments that have not pushed for `maxAgeSeconds` (dead Lambda environments); returns how many. */
export async function deleteStaleGroups(baseUrl: string, opts: StaleGroupOptions): Promise<number> {
  let body: unknown
  try {
    // The timeout signal also bounds reading the body.
    const res = await fetch(baseUrl.replace(/\/$/, '') + '/api/v1/metrics', { signal: AbortSignal.timeout(opts.timeoutMs) })
    if (!res.ok) throw new PushError(`Pushgateway answered ${res.status} to the group listing`)
    body = await res.json()
  } catch (cause) {
    if (cause instanceof PushError) throw cause
    throw new PushError(`Pushgateway did not answer the group listing: ${cause instanceof Error ? cause.name : 'error'}`, { cause })
  }
  const groups: PushgatewayGroup[] =
    typeof body === 'object' && body !== null && 'data' in body && Array.isArray(body.data) ? body.data : []
  const cutoff = Date.now() / 1000 - opts.maxAgeSeconds
  let deleted = 0
  for (const g of groups) {
    const labels = g.labels ?? {}
    if (labels.job !== COUNTERS_JOB || !labels.instance || labels.instance === opts.ownInstance) continue
    const pushed = Number(g.push_time_seconds?.metrics?.[0]?.value ?? 'NaN')
    if (!(pushed < cutoff)) continue
    // Each delete may wait timeoutMs; many dead groups and a slow Pushgateway must not run the
    // caller out of time. What is left goes in the next pass.
    if (!opts.hasTime()) break
    await deleteGroup(baseUrl, { job: COUNTERS_JOB, instance: labels.instance }, opts.timeoutMs)
    deleted++
  }
  return deleted
}
