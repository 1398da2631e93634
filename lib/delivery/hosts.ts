// Who decides where a target's requests go. The admin writes the schema (URL, headers, allowedHosts);
// a deployer may set variables, and a variable may be the URL's host (`{{HOOK_BASE}}/hook`). Without a
// rule a deployer could point that host at itself and receive every substituted secret and every
// literal header value. The rule: a target with `allowedHosts` is only ever delivered to a host in it
// (checked at delivery, for everyone); a deployer's change of variables that moves a target's host
// is refused unless the new host is in the target's `allowedHosts` (checked when it is set).
import type { WebhookTarget } from '../schema/actions.js'
import { substitute } from './template.js'

/**
 * Whether `hostname` (as URL parses it: lower case, no port) is allowed by `allowed`: an entry is a
 * host name (or IP literal) matched exactly, or `*.example.com`, any name under example.com (not
 * example.com itself). Ports are not part of the rule.
 */
export function hostAllowed(hostname: string, allowed: readonly string[]): boolean {
  const host = hostname.toLowerCase()
  return allowed.some(entry => {
    const e = entry.toLowerCase()
    return e.startsWith('*.') ? host.endsWith(e.slice(1)) && host.length > e.length - 1 : host === e
  })
}

/** The host a target's URL reaches with `variables`, or undefined when it cannot be addressed. */
export function targetHost(target: Pick<WebhookTarget, 'url'>, variables: ReadonlyMap<string, string>): string | undefined {
  try {
    return new URL(substitute(target.url, variables)).hostname
  } catch {
    return undefined
  }
}

/**
 * The targets whose host a change of variables by a non-admin would move where the admin did not
 * allow: the host changes (or becomes addressable) and is not in the target's `allowedHosts` (none
 * allowed when it has no such list). A target that cannot be addressed after the change goes nowhere.
 */
export function movedTargets(
  targets: Readonly<Record<string, Pick<WebhookTarget, 'url' | 'allowedHosts'>>>,
  before: ReadonlyMap<string, string>,
  after: ReadonlyMap<string, string>,
): string[] {
  return Object.entries(targets).flatMap(([key, target]) => {
    const next = targetHost(target, after)
    if (next === undefined || next === targetHost(target, before)) return []
    return target.allowedHosts && hostAllowed(next, target.allowedHosts) ? [] : [key]
  })
}
