import { parseArgs } from 'node:util'

/** What one `npm run bench` measures, from flags first, then BENCH_* variables, then the defaults. */
export type BenchOptions = {
  n: number
  rounds: number
  deadlineMs: number
  /** Seconds of each latency run. */
  latencySeconds: number
  /** Offered rates of the latency runs, events per second. */
  latencyRates: number[]
  pgbossBatches: number[]
  /** Dispatch processes of the scale-out rows. */
  scaleProcesses: number[]
  /** Projects the scale-out rows drain. */
  scaleProjects: number[]
  /** The target batch size of the scale-out rows. */
  scaleBatch: number
  /** Overrides serverless.yml's batching window for the latency runs (ms; 0 = none), for experiments. */
  batchWindowMs?: number
  only?: Set<string>
  quick: boolean
}

const USAGE = `usage: npm run bench -- [--quick] [--n N] [--rounds R] [--only key,key]
  --quick        smoke run: N = 2,000, 1 round, 2 s latency runs (about a minute)
  --n N          events per delivery run (BENCH_N, default 20,000)
  --rounds R     measured rounds (BENCH_ROUNDS, default 3)
  --only keys    comma-separated scenario keys (BENCH_ONLY); see bench/README.md`

/** Parses `argv` (without node and the script) and `env`; throws a usage error on an unknown flag. */
export function benchOptions(argv: string[], env: NodeJS.ProcessEnv): BenchOptions {
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        quick: { type: 'boolean' },
        n: { type: 'string' },
        rounds: { type: 'string' },
        only: { type: 'string' },
        help: { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }).values
  } catch (error) {
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${USAGE}`)
  }
  if (parsed.help) {
    process.stdout.write(`${USAGE}\n`)
    process.exit(0)
  }
  const quick = parsed.quick ?? env.BENCH_QUICK === '1'
  const n = positive('--n / BENCH_N', parsed.n ?? env.BENCH_N, quick ? 2_000 : 20_000)
  const only = parsed.only ?? env.BENCH_ONLY
  return {
    quick,
    n,
    rounds: positive('--rounds / BENCH_ROUNDS', parsed.rounds ?? env.BENCH_ROUNDS, quick ? 1 : 3),
    deadlineMs: positive('BENCH_DEADLINE_MS', env.BENCH_DEADLINE_MS, 120_000),
    // 8 s at full size: long enough for ~4,000 and ~16,000 samples, so p99 is not one unlucky event.
    latencySeconds: positive('BENCH_LATENCY_SECONDS', env.BENCH_LATENCY_SECONDS, quick ? 2 : 8),
    // The bench's three offered rates: p99 < 100 ms at 500/s and 2,000/s, < 250 ms at 5,000/s.
    latencyRates: list('BENCH_LATENCY_RATES', env.BENCH_LATENCY_RATES, [500, 2_000, 5_000]),
    // 100 and below are bound by pg-boss's polling interval (see bench/pgboss.ts); 1000 was the best of 25…2500.
    pgbossBatches: list('BENCH_PGBOSS_BATCH', env.BENCH_PGBOSS_BATCH, [250, 1_000, 2_500]),
    scaleProcesses: list('BENCH_SCALE_PROCESSES', env.BENCH_SCALE_PROCESSES, [1, 2, 4]),
    scaleProjects: list('BENCH_SCALE_PROJECTS', env.BENCH_SCALE_PROJECTS, [1, 4]),
    scaleBatch: positive('BENCH_SCALE_BATCH', env.BENCH_SCALE_BATCH, 1),
    ...(env.BENCH_BATCH_WINDOW_MS ? { batchWindowMs: nonNegative('BENCH_BATCH_WINDOW_MS', env.BENCH_BATCH_WINDOW_MS) } : {}),
    ...(only
      ? {
          only: new Set(
            only
              .split(',')
              .map(s => s.trim())
              .filter(Boolean),
          ),
        }
      : {}),
  }
}

function positive(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer`)
  return n
}

function nonNegative(name: string, raw: string): number {
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number >= 0`)
  return n
}

function list(name: string, raw: string | undefined, fallback: number[]): number[] {
  if (raw === undefined || raw === '') return fallback
  return raw.split(',').map(s => positive(name, s.trim(), 0))
}
