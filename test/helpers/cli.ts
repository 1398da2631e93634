import { main } from '../../lib/cli/main.js'

/** What one CLI run wrote and returned. */
export type CliRun = { code: number; out: string; err: string }

/** Runs the operator CLI in-process with `environment` as its whole environment, collecting what it prints. */
export async function runCli(environment: NodeJS.ProcessEnv, argv: string[]): Promise<CliRun> {
  const out: string[] = []
  const err: string[] = []
  const code = await main(argv, environment, { out: s => out.push(s), err: s => err.push(s) })
  return { code, out: out.join('\n'), err: err.join('\n') }
}
