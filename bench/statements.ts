import type pg from 'pg'

/**
 * Counts every statement sent through `pool`, on checked-out clients too (BEGIN and COMMIT count).
 * The bench's own copy (test/helpers/statements.ts is the tests'), so each side may change how it counts.
 */
export function countStatements(pool: pg.Pool): { count(): number; reset(): void } {
  let n = 0
  const patched = new WeakSet<object>()
  pool.on('acquire', client => {
    if (patched.has(client)) return
    patched.add(client)
    const original: unknown = Reflect.get(client, 'query')
    if (typeof original !== 'function') return
    Object.defineProperty(client, 'query', {
      configurable: true,
      value: (...args: unknown[]): unknown => {
        n++
        return Reflect.apply(original, client, args)
      },
    })
  })
  // pool.query checks out a client itself, which the acquire hook counts; patching the pool too would count twice.
  return { count: () => n, reset: () => { n = 0 } }
}
