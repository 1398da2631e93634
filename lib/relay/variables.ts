/** How long the engine may take to answer the variables query. */
const ENGINE_TIMEOUT_MS = 10_000
/** Largest answer read from the engine: variables are short strings, and a runaway answer must not fill memory. */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024

/**
 * The project's variables from the engine's own Actions API (`{ variables { name value } }` on
 * `/actions/<slug>`), as name → value. Values are secrets: errors name the status, never the body.
 */
export async function fetchEngineVariables(engineUrl: string, project: string, token: string): Promise<Record<string, string>> {
  const url = new URL(`actions/${encodeURIComponent(project)}`, engineUrl.endsWith('/') ? engineUrl : `${engineUrl}/`)
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: '{ variables { name value } }' }),
    signal: AbortSignal.timeout(ENGINE_TIMEOUT_MS),
  })
  const text = await res.text()
  if (Buffer.byteLength(text) > MAX_ANSWER_BYTES) throw new Error(`the engine's answer is over ${MAX_ANSWER_BYTES} bytes`)
  if (!res.ok) throw new Error(`the engine answered ${res.status} to the variables query`)
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    throw new Error('the engine answered the variables query with a body that is not JSON')
  }
  const list: unknown = typeof body === 'object' && body !== null ? Reflect.get(Reflect.get(body, 'data') ?? {}, 'variables') : undefined
  if (!Array.isArray(list))
    throw new Error('the engine answered the variables query without data.variables (is the token allowed to read them?)')
  const vars: Record<string, string> = {}
  for (const v of list) {
    const name: unknown = typeof v === 'object' && v !== null ? Reflect.get(v, 'name') : undefined
    const value: unknown = typeof v === 'object' && v !== null ? Reflect.get(v, 'value') : undefined
    if (typeof name !== 'string' || typeof value !== 'string')
      throw new Error('the engine answered a variable without a string name and value')
    vars[name] = value
  }
  return vars
}
