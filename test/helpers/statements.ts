import type pg from 'pg'

/**
 * Counts every statement sent through the pool, including those on checked-out clients (BEGIN and
 * COMMIT count too). Tests use it to hold statements-per-event budgets (bench/statements.ts is the
 * benchmarks' own copy).
 */
export function countStatements(pool: pg.Pool): { count(): number; reset(): void } {
  let n = 0
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
        return Reflect.apply(original, target, args)
      },
    })
  }
  pool.on('acquire', client => patch(client))
  // pool.query checks out a client itself, which the acquire hook counts; patching both would count twice.
  return { count: () => n, reset: () => { n = 0 } }
}
