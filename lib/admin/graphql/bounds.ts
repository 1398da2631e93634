// What a query may cost before a resolver runs. graphql-js parses, validates and executes whatever it
// is given; a hostile document (a megabyte of tokens, a thousand nested selections, fragments that
// expand exponentially, a thousand aliases of failedEvents) would hot-loop or allocate without bound.
// Upstream's tooling sends documents of a few hundred bytes, two levels deep, one root field.
import { Kind, type DocumentNode, type FragmentDefinitionNode, type SelectionSetNode } from 'graphql'

/** Characters of a query document at most: 40 times upstream's largest, and room for an introspection query. */
export const MAX_QUERY_CHARS = 16 * 1024
/** Tokens the parser reads at most (its own bound): a document of one-character tokens stays small too. */
export const MAX_QUERY_TOKENS = 2_000
/**
 * Field nesting at most. The schema's own data is 2 deep (Json is a leaf); the standard introspection
 * query (graphql-js getIntrospectionQuery, what GraphiQL and codegen send) is 15 deep through its
 * `ofType` chain. Deeper can only be an attack on the executor.
 */
export const MAX_QUERY_DEPTH = 20
/**
 * Selections visited at most, fragments expanded: the introspection query visits 230; a
 * document whose fragments multiply is stopped here, before validation walks it.
 */
export const MAX_QUERY_SELECTIONS = 1_000
/** Root fields per document at most: each reads or writes the database, and upstream's tooling sends one. */
export const MAX_ROOT_FIELDS = 10

/** The first bound the document crosses, in words for the caller, or undefined when it is within all. */
export function exceededBound(doc: DocumentNode): string | undefined {
  const fragments = new Map<string, FragmentDefinitionNode>()
  for (const d of doc.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d)
  const budget = { selections: 0, roots: 0 }
  const inPath = new Set<string>()

  // Returns the crossed bound. `depth` counts fields only; fragments and inline fragments add none.
  const walk = (set: SelectionSetNode, depth: number): string | undefined => {
    for (const sel of set.selections) {
      if (++budget.selections > MAX_QUERY_SELECTIONS) return `more than ${MAX_QUERY_SELECTIONS} selections (fragments expanded)`
      let inner: SelectionSetNode | undefined
      if (sel.kind === Kind.FIELD) {
        if (depth === 0 && ++budget.roots > MAX_ROOT_FIELDS) return `more than ${MAX_ROOT_FIELDS} root fields`
        if (depth + 1 > MAX_QUERY_DEPTH) return `fields nested deeper than ${MAX_QUERY_DEPTH}`
        if (sel.selectionSet) {
          const crossed = walk(sel.selectionSet, depth + 1)
          if (crossed) return crossed
        }
        continue
      }
      if (sel.kind === Kind.INLINE_FRAGMENT) inner = sel.selectionSet
      // A cycle or an unknown fragment is left to validation, which refuses both.
      else if (!inPath.has(sel.name.value)) inner = fragments.get(sel.name.value)?.selectionSet
      if (!inner) continue
      const name = sel.kind === Kind.FRAGMENT_SPREAD ? sel.name.value : undefined
      if (name) inPath.add(name)
      const crossed = walk(inner, depth)
      if (name) inPath.delete(name)
      if (crossed) return crossed
    }
    return undefined
  }

  for (const d of doc.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue
    budget.roots = 0
    const crossed = walk(d.selectionSet, 0)
    if (crossed) return crossed
  }
  return undefined
}
