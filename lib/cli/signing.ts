import { generateSecret } from '../delivery/signing.js'
import { printDocument } from './json.js'
import type { Io } from './usage.js'

export const SIGNING_USAGE = `  signing new                               print a fresh Standard Webhooks secret (whsec_…) to store in
                                            a variable that a target's signingSecret names`

/**
 * `actions signing new`: prints a fresh secret, so nobody invents a weak one. Needs no database;
 * returns the exit code (2 for a usage mistake).
 */
export function signingCommand(args: string[], io: Io): number {
  if (args.length !== 1 || args[0] !== 'new') {
    io.err(`signing: expected "signing new"\n\nUsage:\n${SIGNING_USAGE}`)
    return 2
  }
  if (io.json) printDocument(io, { secret: generateSecret() })
  else io.out(generateSecret())
  return 0
}
