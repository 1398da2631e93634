// What a receiver may echo that only an admin may read, besides the variable values: what the admin
// wrote into the targets' URLs and headers. A literal header value (`Authorization: Bearer abc…`) is a
// credential as often as a variable is, and a viewer may not read the schema that holds it.
import type { WebhookTarget } from '../schema/actions.js'
import { substitute } from './template.js'

type TargetText = Pick<WebhookTarget, 'url' | 'headers'>

/**
 * The project's secrets for redaction: every variable value, and each target's URL and header values
 * both as written and with the variables substituted (the form a receiver sees and may quote back).
 */
export function projectSecrets(targets: Iterable<TargetText>, variables: ReadonlyMap<string, string>): string[] {
  const out = [...variables.values()]
  for (const target of targets) {
    for (const written of [target.url, ...Object.values(target.headers ?? {})]) {
      out.push(written)
      try {
        out.push(substitute(written, variables))
      } catch {
        // A variable the project lacks: no request carries this text, the written form is kept.
      }
    }
  }
  return out
}
