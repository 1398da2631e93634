// `npm start`: the functions on embedded defaults (and the Contember relay with --contember). `npm run demo`: the same, plus a guided run.
import { parseArgs } from 'node:util'
import { formatError } from '../lib/errors.js'
import { runDemo } from './demo.js'
import { startLocalRelay } from './relay.js'
import { startLocalStack, type LocalStack } from './stack.js'

const USAGE = `Usage: npm start -- [--port N] [--data-dir DIR] [--sweep-interval SECONDS] [--otlp URL] [--contember URL]... [--demo]

Starts Postgres (embedded unless DATABASE_URL is set), an SQS emulator (unless SIGNAL_QUEUE_URL is
set), and runs enqueue, dispatch, the sweeper and the admin API as Lambda would. Ctrl-C (SIGINT), SIGTERM or
SIGHUP stops it like a service: no new claims, in-flight deliveries finish or time out and are
recorded, unstarted claims go back, then Postgres stops. The admin API (/v1/, /actions/) takes the
bootstrap token printed at start, or ACTIONS_ADMIN_TOKEN when set, as a caller on every project.
  --port N              HTTP port of the enqueue endpoint and the admin API (default 3000; 0 picks a free one)
  --data-dir DIR        keep the embedded Postgres cluster in DIR across restarts
  --sweep-interval S    seconds between sweeper runs (default 60, as deployed)
  --otlp URL            export traces to the OTLP/HTTP collector at URL (e.g. http://127.0.0.1:4318;
                        sets OTEL_EXPORTER_OTLP_ENDPOINT, with TRACES_TO_WEBHOOKS on unless set)
  --contember URL       also run the relay from this Contember project database's outbox
                        (postgres://…/<slug>, or <project>=postgres://…; repeat for more)
  --demo                load a sample schema, enqueue sample events to a flaky demo receiver,
                        show deliveries, retries and the final counters, then exit (through the
                        stack of a running "npm start" when one answers on PORT, else its own)`

// Lambda runs Node 22; the SDK's notice about Node 20 says nothing about this project.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true'

/** After an orderly stop, anything still holding the event loop gets this long before the process exits anyway. */
const EXIT_GRACE_MS = 2_000

// Taken before anything starts, so a signal during startup also ends in an orderly stop. A terminal's
// Ctrl-C reaches every process of the group, and a wrapper (npm, tsx) may relay it once more: only
// the first signal counts.
let signalled: NodeJS.Signals | undefined
const onSignal = new Promise<NodeJS.Signals>(resolve => {
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      if (signalled) {
        process.stdout.write(`${sig}: already stopping (in-flight deliveries finish or reach their timeout)\n`)
        return
      }
      signalled = sig
      resolve(sig)
    })
  }
})

type Options = {
  port: number
  sweepSeconds: number
  dataDir?: string | undefined
  otlp?: string | undefined
  contember: string[]
  demo: boolean
  portGiven: boolean
}

/** The command line as options, or the exit code when it asks for help or makes no sense. */
function parseOptions(): Options | number {
  let args
  try {
    args = parseArgs({
      options: {
        port: { type: 'string' },
        'data-dir': { type: 'string' },
        'sweep-interval': { type: 'string' },
        otlp: { type: 'string' },
        contember: { type: 'string', multiple: true },
        demo: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n\n${USAGE}\n`)
    return 2
  }
  if (args.help) {
    process.stdout.write(USAGE + '\n')
    return 0
  }
  const demo = args.demo ?? false
  const port = args.port === undefined ? (demo ? 0 : Number(process.env.PORT ?? 3000)) : Number(args.port)
  const sweepSeconds = Number(args['sweep-interval'] ?? (demo ? 5 : 60))
  if (!Number.isInteger(port) || port < 0 || !(sweepSeconds > 0)) {
    process.stderr.write(`--port takes a port number and --sweep-interval a positive number of seconds\n\n${USAGE}\n`)
    return 2
  }
  if (args.otlp !== undefined && !URL.canParse(args.otlp)) {
    process.stderr.write(`--otlp takes the URL of an OTLP/HTTP collector, such as http://127.0.0.1:4318\n\n${USAGE}\n`)
    return 2
  }
  return {
    port,
    sweepSeconds,
    dataDir: args['data-dir'],
    otlp: args.otlp,
    contember: args.contember ?? [],
    demo,
    portGiven: args.port !== undefined,
  }
}

/** `npm run demo` while `npm start` runs in another terminal: the demo goes through that stack; false when none answers. */
async function demoThroughRunning(print: (line: string) => void): Promise<boolean> {
  const running = `http://127.0.0.1:${process.env.PORT ?? 3000}`
  const up = await fetch(running + '/healthz', { signal: AbortSignal.timeout(1000) }).then(
    r => r.ok,
    () => false,
  )
  if (!up) return false
  print(`using the local stack running at ${running}`)
  await runDemo(running, print)
  return true
}

async function main(): Promise<number> {
  const opts = parseOptions()
  if (typeof opts === 'number') return opts
  const print = (line: string) => process.stdout.write(line + '\n')
  if (opts.demo && !opts.portGiven && (await demoThroughRunning(print))) return 0
  if (opts.otlp !== undefined) {
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = opts.otlp
    // Locally the point is to follow a change to its receiver: the webhook requests carry the trace.
    process.env.TRACES_TO_WEBHOOKS ??= 'true'
  }
  // Logs stay JSON on stderr (as CloudWatch would get them); stdout tells the story.
  process.env.LOG_LEVEL ??= opts.demo ? 'error' : 'warn'
  print('Actions local stack')
  const starting = startLocalStack({
    env: process.env,
    ...(opts.dataDir ? { dataDir: opts.dataDir } : {}),
    port: opts.port,
    sweepIntervalMs: opts.sweepSeconds * 1000,
    print: line => print('  ' + line),
    logSink: line => {
      process.stderr.write(line + '\n')
    },
    onBatch: b => print(`batch      ${b.project}/${b.target}: ${b.succeeded}/${b.events} delivered in ${b.durationMs} ms`),
  })
  const early = await Promise.race([starting.then(() => undefined), onSignal])
  const stack = await starting
  // A relay that cannot start (an outbox it does not know) stops the stack it came with.
  const relay =
    opts.contember.length && !early
      ? await startLocalRelay(
          stack,
          opts.contember,
          process.env,
          line => print('  ' + line),
          line => void process.stderr.write(line + '\n'),
        ).catch(async (e: unknown) => {
          await stack.stop()
          throw e
        })
      : undefined
  return runUntilStopped(stack, relay, early, opts.demo, print)
}

/** Runs the started stack until a signal (or, with --demo, the demo's end), then stops it like a service. */
async function runUntilStopped(
  stack: LocalStack,
  relay: { stop(): Promise<void> } | undefined,
  early: NodeJS.Signals | undefined,
  demo: boolean,
  print: (line: string) => void,
): Promise<number> {
  const stop = async (why: string) => {
    print(`stopping (${why})…`)
    await relay?.stop()
    await stack.stop()
    print('stopped')
  }
  if (early) {
    await stop(early)
    return 0
  }
  if (demo) {
    try {
      await Promise.race([runDemo(stack.url, print), onSignal])
    } finally {
      await stop(signalled ?? 'demo done')
    }
    return 0
  }
  printOperatorEnv(stack, print)
  print('ready; Ctrl-C to stop')
  await stop(await onSignal)
  return 0
}

/** The environment that points `npx actions …` (and its wake-up signals) at this stack. */
function printOperatorEnv(stack: LocalStack, print: (line: string) => void): void {
  // A DATABASE_URL or queue given by the caller may hold real credentials: named, never printed.
  const vars = [
    process.env.DATABASE_URL ? undefined : `DATABASE_URL=${stack.databaseUrl}`,
    stack.sqsEndpoint
      ? `SIGNAL_QUEUE_URL=${stack.queueUrl} AWS_ENDPOINT_URL_SQS=${stack.sqsEndpoint} AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local`
      : undefined,
  ].filter(v => v !== undefined)
  print(`operator CLI, in another terminal${vars.length < 2 ? ' (with your own DATABASE_URL / SIGNAL_QUEUE_URL set)' : ''}:`)
  if (vars.length) print(`  export ${vars.join(' ')}`)
  print('  npx actions events due <project>')
}

process.exitCode = await main().catch(e => {
  process.stderr.write(`${formatError(e)}\n`)
  return 1
})
setTimeout(() => process.exit(), EXIT_GRACE_MS).unref()
