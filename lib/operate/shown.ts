// Stored receiver text as every door shows it (REST, GraphQL, the CLI, the console through REST):
// redacted with the project's secrets as they are now, so a value stored before redaction existed,
// a variable added since, or a header value echoed back is never shown.
import { getSchemaAndVariables } from '../db/schemas.js'
import { projectSecrets } from '../delivery/secrets.js'
import { redactor, type Redactor } from '../text.js'
import type { Queryable } from '../db/pool.js'

/** A redactor for showing stored text, and how far one redacted form may reach (characters). */
export type ShownRedaction = { redact: Redactor; reach: number }

/**
 * The redactor of `project`'s variable values and its current schema's URLs and header values. `reach`
 * bounds how many characters one redacted form spans: the URL-encoded form of a character takes up to
 * 9 (`%E2%82%AC`), more than its JSON escape (6), so a listing that fetches that far past what it shows
 * never cuts a secret in half.
 */
export async function shownRedaction(db: Queryable, project: string): Promise<ShownRedaction> {
  const { stored, variables } = await getSchemaAndVariables(db, project)
  const secrets = projectSecrets(Object.values(stored?.schema.targets ?? {}), variables)
  const reach = 9 * secrets.reduce((longest, v) => Math.max(longest, v.length), 0)
  return { redact: redactor(secrets), reach }
}
