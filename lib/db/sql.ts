/**
 * Named parameters for the hot statements (docs/design.md, "Statements"). A statement is written with `$name`
 * placeholders and compiled once, at module load, to Postgres' `$1`, `$2`, … in the order of its
 * parameter list, so the text sent (and planned, and prepared under a query name) is plain positional
 * SQL. Not a `WITH params AS (SELECT $1 …)` CTE on purpose: a CTE referenced more than once is
 * materialised, and the planner then reads its columns as values of a subplan, which can turn an index
 * condition into a filter. Measured on 100,000 events (20,000 due): the claim rewritten over such a CTE
 * lost its row goal, read and sorted all 20,000 due events instead of the first 800 of the due index,
 * and its probe check filtered the targets instead of looking them up: 360–490 ms against 23–44 ms.
 * Values are only ever passed as parameters, never spliced into the text.
 */

/** A compiled statement: its positional text, its parameters in `$n` order, and the values for one call. */
export type Statement<P> = {
  readonly text: string
  /** `names[n - 1]` is the name of `$n`. */
  readonly names: readonly (keyof P & string)[]
  /** The values array for `text`, in `$n` order. */
  values(params: P): unknown[]
}

// A placeholder is `$` and an identifier; jsonpath's `$[…]` and `$.…` inside literals do not match.
const PLACEHOLDER = /\$([A-Za-z_][A-Za-z0-9_]*)/g
const POSITIONAL = /\$\d/

/** Names of P that `names` leaves out; `never` when it lists them all. */
type Missing<P, N extends readonly unknown[]> = Exclude<keyof P, N[number]>

/**
 * Compiles `text` for parameters of type `P`, numbered in the order of `names`, which must list every
 * key of P (checked by the compiler). The list, not the text, fixes the numbers: moving a clause never
 * renumbers what is sent, so plans, prepared statements and pg_stat_statements keep seeing one text.
 * Throws at module load when the text names a parameter not in the list, lists one it never uses, or
 * mixes in a positional `$n`.
 */
export function named<P extends object>() {
  return <const N extends readonly (keyof P & string)[]>(
    names: N,
    text: [Missing<P, N>] extends [never] ? string : { missing: Missing<P, N> },
  ): Statement<P> => {
    if (typeof text !== 'string') throw new TypeError('named(): a parameter of the type is not in the list')
    return compile<P>(names, text)
  }
}

function compile<P>(names: readonly (keyof P & string)[], text: string): Statement<P> {
  if (POSITIONAL.test(text)) throw new Error(`A named statement holds a positional parameter: ${text.slice(0, 80)}`)
  const number = new Map<string, number>(names.map((n, i) => [n, i + 1]))
  if (number.size !== names.length) throw new Error(`A parameter is listed twice: ${names.join(', ')}`)
  const used = new Set<string>()
  const compiled = text.replace(PLACEHOLDER, (_, name: string) => {
    const n = number.get(name)
    if (n === undefined) throw new Error(`Parameter $${name} is not in the statement's list (${names.join(', ')})`)
    used.add(name)
    return `$${n}`
  })
  const unused = names.filter(n => !used.has(n))
  if (unused.length > 0) throw new Error(`Listed parameters the statement never uses: ${unused.join(', ')}`)
  return { text: compiled, names, values: params => names.map(n => params[n]) }
}
