// Serves the console's three files for both transports: the local stack's HTTP server and
// the admin function. Only the known names are answered, so no path can reach anything else, and
// every answer carries a strict Content-Security-Policy: no inline script or style, no other origin.
import type { AdminResponse } from '../lib/admin/types.js'
import { APP_JS, CONSOLE_CSS, INDEX_HTML } from './assets.js'

/** The policy every console answer carries: only its own origin, nothing inline, never framed. */
export const CONSOLE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

const HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  // A new deploy must reach the browser at once; the files are small.
  'cache-control': 'no-cache',
}

const FILES: ReadonlyMap<string, { type: string; body: string }> = new Map([
  ['/console', { type: 'text/html; charset=utf-8', body: INDEX_HTML }],
  ['/console/', { type: 'text/html; charset=utf-8', body: INDEX_HTML }],
  ['/console/index.html', { type: 'text/html; charset=utf-8', body: INDEX_HTML }],
  ['/console/console.css', { type: 'text/css; charset=utf-8', body: CONSOLE_CSS }],
  ['/console/app.js', { type: 'text/javascript; charset=utf-8', body: APP_JS }],
])

/** True when `path` is the console's: `/console` or below it. */
export function isConsolePath(path: string): boolean {
  return path === '/console' || path.startsWith('/console/')
}

/** The answer to a console request: a known file, 405 for a method other than GET or HEAD, else 404. */
export function consoleResponse(method: string, path: string): AdminResponse {
  const file = FILES.get(path)
  const plain = (status: number, text: string, extra: Record<string, string> = {}): AdminResponse => ({
    status,
    headers: { ...HEADERS, 'content-type': 'text/plain; charset=utf-8', ...extra },
    body: text,
  })
  if (method !== 'GET' && method !== 'HEAD') return plain(405, 'Method not allowed\n', { allow: 'GET, HEAD' })
  if (!file) return plain(404, 'Not found\n')
  return { status: 200, headers: { ...HEADERS, 'content-type': file.type }, body: method === 'HEAD' ? '' : file.body }
}
