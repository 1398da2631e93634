import type pg from 'pg'

/**
 * Counts every statement sent through the pool, including those on checked-out clients (BEGIN and
 * COMMIT count too), and the named (prepared) ones by name. Tests use it to hold statements-per-event
 * budgets (bench/statements.ts is the benchmarks' own copy).
 */
export function countStatements(pool: pg.Pool): { count(): number; named(name: string): number; reset(): void } {
  let n = 0
  // Prepared statements by name (lib/db names its hot statements, e.g. actions_claim).
  const byName = new Map<string, number>()
  const patched = new WeakSet<object>()
  const patch = (target: object) => {
    if (patched.has(target)) return
    patched.add(target)
    const original: unknown = Reflect.get(target, 'query')
    if (typeof original !== 'function') return
    Object.defineProperty(target, 'query', {
      configurable: true,
      value: (...args: unknown[]): unknown => {
        n++
        const config = args[0]
        if (typeof config === 'object' && config !== null && 'name' in config && typeof config.name === 'string')
          byName.set(config.name, (byName.get(config.name) ?? 0) + 1)
        return Reflect.apply(original, target, args)
      },
    })
  }
  pool.on('acquire', client => patch(client))
  // pool.query checks out a client itself, which the acquire hook counts; patching both would count twice.
  return {
    count: () => n,
    named: name => byName.get(name) ?? 0,
    reset: () => {
      n = 0
      byName.clear()
    },
  }
}

/** One claim statement as a test saw it: when it was sent (ms, this process's clock) and the event ids it claimed. */
export type SeenClaim = { sentAt: number; ids: string[] }

/**
 * Records every claim statement (`actions_claim`) sent through the pool: when it was sent and which
 * events it returned. A test asks what was claimed before a state it observed, instead of guessing
 * how long a request takes to arrive.
 */
export function watchClaims(pool: pg.Pool): { claims(): readonly SeenClaim[] } {
  const seen: SeenClaim[] = []
  const patched = new WeakSet<object>()
  pool.on('acquire', client => {
    if (patched.has(client)) return
    patched.add(client)
    const original: unknown = Reflect.get(client, 'query')
    if (typeof original !== 'function') return
    Object.defineProperty(client, 'query', {
      configurable: true,
      value: (...args: unknown[]): unknown => {
        const config = args[0]
        if (typeof config !== 'object' || config === null || !('name' in config) || config.name !== 'actions_claim')
          return Reflect.apply(original, client, args)
        const claim: SeenClaim = { sentAt: Date.now(), ids: [] }
        seen.push(claim)
        const collect = (r: unknown) => {
          const rows: unknown = typeof r === 'object' && r !== null ? Reflect.get(r, 'rows') : undefined
          if (Array.isArray(rows)) for (const row of rows) if (typeof row?.id === 'string') claim.ids.push(row.id)
        }
        // pool.query passes a callback; a checked-out client's caller awaits the promise.
        const last = args[args.length - 1]
        if (typeof last === 'function') {
          const rest = args.slice(0, -1)
          return Reflect.apply(original, client, [
            ...rest,
            (err: unknown, r: unknown) => {
              if (!err) collect(r)
              return Reflect.apply(last, undefined, [err, r])
            },
          ])
        }
        const result: unknown = Reflect.apply(original, client, args)
        if (result instanceof Promise) result.then(collect, () => {})
        return result
      },
    })
  })
  return { claims: () => seen }
}
