import { SpanKind, type Context } from '@opentelemetry/api'
import type pg from 'pg'
import type { Tracing } from './tracing.js'

/**
 * `db` with a client span around each named statement it runs (OTEL_ACTIONS_SQL): the claim's and the
 * record's, as children of `parent` (the drain's span). A span is named by its statement's name and
 * carries nothing else of it: no text, no values. Unnamed statements and clients checked out of the
 * pool (a capped target's claim transaction) run untraced. Every other property is the pool's own.
 */
export function tracedStatements<T extends Pick<pg.Pool, 'query'>>(db: T, tracing: Tracing, parent?: Context): T {
  const query = (config: unknown, values?: unknown) => {
    const run = () => (db.query as (c: unknown, v?: unknown) => Promise<unknown>).call(db, config, values)
    const name = typeof config === 'object' && config !== null && 'name' in config ? config.name : undefined
    if (typeof name !== 'string') return run()
    return tracing.span(name, { kind: SpanKind.CLIENT, attributes: { 'db.system.name': 'postgresql' } }, run, parent)
  }
  return new Proxy(db, {
    get: (target, prop) => {
      if (prop === 'query') return query
      const value: unknown = Reflect.get(target, prop, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}
