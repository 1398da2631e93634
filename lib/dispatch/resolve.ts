import type { Config } from '../config.js'
import { addressTarget, type Endpoint } from '../delivery/webhook.js'
import type { Logger } from '../log.js'
import type { ProjectMetrics } from '../metrics/registry.js'
import { TARGET_DEFAULTS, type WebhookTarget } from '../schema/actions.js'
import { targetProblems } from '../schema/limits.js'
import { projectSecrets } from '../delivery/secrets.js'
import { excerpt, redactor } from '../text.js'

/**
 * A target as one drain runs it, resolved once at the drain's start: every option with its default
 * applied (here and nowhere else), its lease, and its address with the project's variables in it.
 * The address holds secrets: a resolved target is never logged.
 */
export type ResolvedTarget = Endpoint & {
  name: string
  batchSize: number
  maxAttempts: number
  initialRepeatIntervalMs: number
  /** How long a claim of this target lasts: its timeout plus LEASE_MARGIN_MS. */
  leaseMs: number
  /** Its caps, when it has them (lib/db/flow.ts). */
  maxInFlight?: number
  maxPerSecond?: number
  /** Why the drain leaves this target's events alone (unclaimed, attempts unchanged); undefined when it runs. */
  heldBack?: 'broken' | 'too slow'
}

type ResolveInput = {
  targets: readonly WebhookTarget[]
  variables: ReadonlyMap<string, string>
  config: Pick<Config, 'MAX_TARGET_TIMEOUT_MS' | 'DISPATCH_TIME_MARGIN_MS' | 'LEASE_MARGIN_MS'>
  /** Time left in the invocation at the drain's start. */
  remainingMs: number
  log: Logger
  metrics: ProjectMetrics
}

/**
 * Resolves every target of the stored schema, by name. A schema stored before a limit existed (or
 * under a larger MAX_TARGET_TIMEOUT_MS) is held back as `broken` until fixed: running it could
 * overflow the record statement or reach Object.prototype. A target slower than the time left is held
 * back as `too slow` for this invocation only. Each held target is warned once and counted.
 */
export function resolveTargets({ targets, variables, config, remainingMs, log, metrics }: ResolveInput): Map<string, ResolvedTarget> {
  const out = new Map<string, ResolvedTarget>()
  // One redactor over every variable value and every target's URL and header values (a receiver may
  // quote any of them back), shared by the targets: building it per target repeats the work.
  const redact = redactor(projectSecrets(targets, variables))
  for (const target of targets) {
    const timeoutMs = target.timeoutMs ?? TARGET_DEFAULTS.timeoutMs
    const problems = targetProblems(target, { maxTimeoutMs: config.MAX_TARGET_TIMEOUT_MS })
    const tooSlow = problems.length === 0 && timeoutMs + config.DISPATCH_TIME_MARGIN_MS > remainingMs
    const heldBack = problems.length > 0 ? 'broken' : tooSlow ? 'too slow' : undefined
    if (heldBack) {
      log.warn('Target held back: its events wait, unclaimed', {
        // Cut: a name stored before names had a bound may be megabytes long.
        target: excerpt(target.name),
        problems:
          problems.length > 0
            ? problems
            : [`timeoutMs: ${timeoutMs} ms does not fit the ${Math.floor(remainingMs)} ms left in this invocation`],
      })
    }
    out.set(target.name, {
      name: target.name,
      target,
      // A broken target is never delivered to, so its address is not worth resolving.
      address: heldBack === 'broken' ? { ok: false, error: 'Target held back' } : addressTarget(target, variables, redact),
      timeoutMs,
      leaseMs: timeoutMs + config.LEASE_MARGIN_MS,
      batchSize: target.batchSize ?? TARGET_DEFAULTS.batchSize,
      maxAttempts: target.maxAttempts ?? TARGET_DEFAULTS.maxAttempts,
      initialRepeatIntervalMs: target.initialRepeatIntervalMs ?? TARGET_DEFAULTS.initialRepeatIntervalMs,
      ...(target.maxInFlight !== undefined ? { maxInFlight: target.maxInFlight } : {}),
      ...(target.maxPerSecond !== undefined ? { maxPerSecond: target.maxPerSecond } : {}),
      ...(heldBack ? { heldBack } : {}),
    })
  }
  metrics.targetsHeld([...out.values()].filter(t => t.heldBack).length)
  return out
}
