import { readdir, readFile } from 'node:fs/promises'
import type pg from 'pg'

/**
 * CPU used during one measured section, as a share of one core (100 = one core busy throughout);
 * `bench` includes the dispatch child processes of the scale-out rows; `producer` is the latency rows'
 * AWS side: load generator, SQS emulator and event source poller (bench/producer.ts), 0 while it
 * idles or when it is not running.
 * `benchMs` and `postgresMs` are the bench's and Postgres' CPU time in ms, unrounded, for CPU per event.
 */
export type CpuShare = {
  bench: number
  receiver: number
  producer: number
  postgres: number
  machine: number
  benchMs: number
  postgresMs: number
}

type Snapshot = {
  at: number
  benchMicros: number
  receiverMicros: number
  producerMicros: number
  pgTicks: Map<number, number>
  machineBusy: number
}

/** CPU time so far of the bench's other processes, microseconds: the dispatch children (billed to the bench) and the producer. */
export type OtherProcesses = { childMicros?: () => Promise<number>; producerMicros?: () => Promise<number> }

// Linux reports per-process CPU in clock ticks; USER_HZ is 100 on every mainstream distribution.
const TICK_MS = 10

/**
 * Where the CPU goes while a contender runs: this process, the receiver process, the producer process,
 * the Postgres processes serving the contender's database (plus the server's background processes), and
 * the whole machine, so that load from anything else on the box shows as the difference. Reads /proc;
 * on other systems the Postgres and machine shares are reported as 0.
 */
export function createCpuMeter(admin: pg.Client, database: string, receiverMicros: () => Promise<number>, others: OtherProcesses = {}) {
  const none = async () => 0
  const { childMicros = none, producerMicros = none } = others
  const snapshot = async (): Promise<Snapshot> => {
    const usage = process.cpuUsage()
    const [receiver, children, producer, pgTicks, machineBusy] = await Promise.all([
      receiverMicros(),
      childMicros(),
      producerMicros(),
      postgresTicks(),
      machineBusyTicks(),
    ])
    return {
      at: performance.now(),
      benchMicros: usage.user + usage.system + children,
      receiverMicros: receiver,
      producerMicros: producer,
      pgTicks,
      machineBusy,
    }
  }
  return {
    start: snapshot,
    async stop(start: Snapshot): Promise<CpuShare> {
      const end = await snapshot()
      const ms = end.at - start.at
      // Backends of other databases (say, a test run sharing the server) are someone else's load.
      const { rows } = await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1 OR datname IS NULL`, [
        database,
      ])
      const ours = new Set(rows.map(r => r.pid))
      let pgTicksUsed = 0
      for (const [pid, ticks] of end.pgTicks) if (ours.has(pid)) pgTicksUsed += ticks - (start.pgTicks.get(pid) ?? 0)
      const share = (usedMs: number) => Math.round((usedMs / ms) * 100)
      return {
        bench: share((end.benchMicros - start.benchMicros) / 1000),
        receiver: share((end.receiverMicros - start.receiverMicros) / 1000),
        producer: share((end.producerMicros - start.producerMicros) / 1000),
        postgres: share(pgTicksUsed * TICK_MS),
        machine: share((end.machineBusy - start.machineBusy) * TICK_MS),
        benchMs: (end.benchMicros - start.benchMicros) / 1000,
        postgresMs: pgTicksUsed * TICK_MS,
      }
    },
  }
}

export type CpuMeter = ReturnType<typeof createCpuMeter>

/** utime + stime of every process named `postgres`, by pid. */
async function postgresTicks(): Promise<Map<number, number>> {
  const out = new Map<number, number>()
  let pids: string[]
  try {
    pids = (await readdir('/proc')).filter(d => /^\d+$/.test(d))
  } catch {
    return out
  }
  await Promise.all(
    pids.map(async pid => {
      try {
        const stat = await readFile(`/proc/${pid}/stat`, 'utf8')
        // Field 2 is "(comm)" and may hold spaces; everything after its closing parenthesis is space-separated.
        const open = stat.indexOf('(')
        const close = stat.lastIndexOf(')')
        if (stat.slice(open + 1, close) !== 'postgres') return
        const fields = stat.slice(close + 2).split(' ')
        // After the comm: state is fields[0], so utime (field 14) is [11] and stime (field 15) is [12].
        out.set(Number(pid), Number(fields[11]) + Number(fields[12]))
      } catch {
        // The process ended between readdir and readFile.
      }
    }),
  )
  return out
}

/** Busy ticks of all cores together: everything but idle and iowait. */
async function machineBusyTicks(): Promise<number> {
  try {
    const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0] ?? ''
    const [, ...values] = line.trim().split(/\s+/)
    const n = values.map(Number)
    const idle = (n[3] ?? 0) + (n[4] ?? 0)
    return n.slice(0, 8).reduce((a, b) => a + b, 0) - idle
  } catch {
    return 0
  }
}
