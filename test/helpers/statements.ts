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
