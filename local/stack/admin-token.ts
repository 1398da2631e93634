// The admin API's bootstrap token of the local stack: a Bearer token that acts on every project.
import { randomBytes } from 'node:crypto'
import { bearerToken } from '../../lib/admin/auth.js'

/** Random bytes of a bootstrap token: as many as a project token's (lib/db/tokens.ts). */
const BOOTSTRAP_TOKEN_BYTES = 32
/** The shortest ACTIONS_ADMIN_TOKEN taken: shorter ones are guessable. */
const MIN_TOKEN_CHARS = 16

/** ACTIONS_ADMIN_TOKEN when set (it must be usable as a Bearer token), else a fresh random token for this start. */
export function bootstrapToken(env: NodeJS.ProcessEnv): string {
  const given = env.ACTIONS_ADMIN_TOKEN
  if (given === undefined || given === '') return `actions_local_${randomBytes(BOOTSTRAP_TOKEN_BYTES).toString('base64url')}`
  // Checked by the parser the router uses, so a token that could never be sent is refused at start.
  if (given.length < MIN_TOKEN_CHARS || bearerToken(`Bearer ${given}`) !== given)
    throw new Error('ACTIONS_ADMIN_TOKEN must be at least 16 characters of A-Z a-z 0-9 - . _ ~ + / (a Bearer token)')
  return given
}
