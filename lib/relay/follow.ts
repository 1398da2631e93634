import type { Queryable } from '../db/pool.js'
import { forgetAllRefused } from '../db/relay.js'
import { getCurrentSchema, storeSchema } from '../db/schemas.js'
import { parseActionsSchema } from '../schema/actions.js'
import { deployedActions } from './outbox.js'

/** What following the engine's schema did. */
export type Followed = {
  /** The deployed schema's checksum (the engine's), to skip the next look while it stays the same. */
  checksum: string
  /** The Actions schema version stored now, when the deployed actions differed from Actions' current ones. */
  storedVersion?: number
}

/**
 * Makes Actions' current schema of `project` the engine's deployed actions (targets and triggers, read
 * from the project's `system.schema`), storing a new version only when they differ; then forgets the
 * project's refusals, so rows refused under the old schema are looked at again. `seenChecksum`: the
 * checksum last followed, so an unchanged deployment costs one small read. Throws a ValidationError
 * (nothing stored) when Actions cannot run the deployed actions.
 */
export async function followSchema(source: Queryable, actions: Queryable, project: string, seenChecksum?: string): Promise<Followed> {
  const deployed = await deployedActions(source)
  if (!deployed) throw new Error(`project ${project} has no deployed schema (system.schema is empty): deploy a migration first`)
  if (deployed.checksum === seenChecksum) return { checksum: deployed.checksum }
  const wanted = parseActionsSchema(deployed.actions)
  const current = await getCurrentSchema(actions, project)
  if (current && canonical(current.schema) === canonical(wanted)) return { checksum: deployed.checksum }
  const storedVersion = await storeSchema(actions, project, deployed.actions)
  await forgetAllRefused(actions, project)
  return { checksum: deployed.checksum, storedVersion }
}

/** JSON with object keys sorted, so two schemas compare by content (a schema is validated, so its depth is bounded). */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  if (typeof value === 'object' && value !== null)
    return `{${Object.keys(value)
      .sort()
      .map(k => `${JSON.stringify(k)}:${canonical(Reflect.get(value, k))}`)
      .join(',')}}`
  return JSON.stringify(value) ?? 'null'
}
