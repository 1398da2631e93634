import type pg from 'pg'

/** A statement as it goes out: the driver's own `query` and the arguments it was called with. */
export type QueryCall = (original: (...args: unknown[]) => unknown, args: unknown[]) => unknown

/**
 * Routes every statement sent through `pool` through `wrap`, on checked-out clients too (BEGIN and
 * COMMIT included). pool.query checks out a client itself, which the acquire hook sees; patching the
 * pool too would see it twice.
 */
export function onEveryQuery(pool: pg.Pool, wrap: QueryCall): void {
  const patched = new WeakSet<object>()
  pool.on('acquire', client => {
    if (patched.has(client)) return
    patched.add(client)
    const original: unknown = Reflect.get(client, 'query')
    if (typeof original !== 'function') return
    const call = (...args: unknown[]): unknown => Reflect.apply(original, client, args)
    Object.defineProperty(client, 'query', { configurable: true, value: (...args: unknown[]): unknown => wrap(call, args) })
  })
}

/**
 * Counts every statement sent through `pool`. The bench's own copy (test/helpers/statements.ts is the
 * tests'), so each side may change how it counts.
 */
export function countStatements(pool: pg.Pool): { count(): number; reset(): void } {
  let n = 0
  onEveryQuery(pool, (query, args) => {
    n++
    return query(...args)
  })
  return {
    count: () => n,
    reset: () => {
      n = 0
    },
  }
}
