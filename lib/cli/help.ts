import { EVENTS_USAGE, oneLine } from './events.js'
import { SCHEMA_USAGE, MIGRATE_USAGE } from './schema.js'
import { RELAY_USAGE } from './relay.js'
import { SIGNING_USAGE } from './signing.js'
import { TARGETS_USAGE } from './targets.js'
import { TOKENS_USAGE } from './tokens.js'
import { VARIABLES_USAGE } from './variables.js'

/** Each command's lines of the usage text, by command name. */
const COMMANDS: Readonly<Record<string, string>> = {
  migrate: MIGRATE_USAGE,
  schema: SCHEMA_USAGE,
  variables: VARIABLES_USAGE,
  events: EVENTS_USAGE,
  targets: TARGETS_USAGE,
  tokens: TOKENS_USAGE,
  signing: SIGNING_USAGE,
  relay: RELAY_USAGE,
}

const FLAGS = `
Every command: --json prints data as JSON instead: one document on one line for one thing, one
document per line (NDJSON) for a listing, in the admin API's shapes; messages and errors stay on stderr.
--help (or "actions help <command>") prints a command's usage and needs no setting.`

/** The whole usage text: every command, the environment, the exit codes. */
export const USAGE = `Usage: actions <command> [args] [--json]

Commands:
${Object.values(COMMANDS).join('\n')}
${FLAGS}

Environment: DATABASE_URL (postgres://user@host:port/db), with DATABASE_CA and DB_PREPARED_STATEMENTS as in the functions; for the wake-up signal of events retry
and targets resume also SIGNAL_QUEUE_URL, AWS_REGION and the AWS SDK's usual keys (AWS_ENDPOINT_URL_SQS for an emulator),
bounded by SQS_CONNECT_TIMEOUT_MS, SQS_REQUEST_TIMEOUT_MS and SQS_MAX_ATTEMPTS as in the functions;
schema set checks targets' timeoutMs against MAX_TARGET_TIMEOUT_MS (set it as dispatch has it)

Exit codes: 0 ok, 1 failure, 2 usage error`

/** What a help request prints, where, and its exit code. */
export type Help = { text: string; stream: 'out' | 'err'; code: number }

/**
 * The answer to a help request in `argv`, or undefined when it asks for none: `actions`, `actions --help`,
 * `actions help [<command>]`, or `--help`/`-h` anywhere before `--` in a command's arguments. Decided
 * before any setting is read, so usage needs no DATABASE_URL.
 */
export function helpFor(argv: readonly string[]): Help | undefined {
  const [cmd, ...rest] = argv
  // No command at all is a mistake (exit 2), but the usage is what the caller wanted to see.
  if (cmd === undefined) return { text: USAGE, stream: 'out', code: 2 }
  if (cmd === '--help' || cmd === '-h') return { text: USAGE, stream: 'out', code: 0 }
  if (cmd === 'help') return rest[0] === undefined ? { text: USAGE, stream: 'out', code: 0 } : commandHelp(rest[0])
  const end = rest.indexOf('--')
  const flags = end < 0 ? rest : rest.slice(0, end)
  return flags.includes('--help') || flags.includes('-h') ? commandHelp(cmd) : undefined
}

function commandHelp(cmd: string): Help {
  const lines = Object.hasOwn(COMMANDS, cmd) ? COMMANDS[cmd] : undefined
  // The name is the caller's own text: cut so a stray paste stays one short line.
  if (lines === undefined) return { text: `unknown command "${oneLine(cmd, 40)}"\n\n${USAGE}`, stream: 'err', code: 2 }
  return { text: `Usage: actions ${cmd} …\n${lines}\n${FLAGS}`, stream: 'out', code: 0 }
}
