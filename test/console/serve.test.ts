// The console's files: the generated module is what console/build.ts makes, only the known
// names are served, each with the strict CSP, and the admin function serves them without touching a database.
import { readFile } from 'node:fs/promises'
import type { FunctionUrlEvent } from '../../functions/admin.js'
import { describe, expect, it } from 'vitest'
import { consoleAssetsModule } from '../../console/build.js'
import { CONSOLE_CSP, consoleResponse, isConsolePath } from '../../console/serve.js'
import { createHandler } from '../../functions/admin.js'
import { createContext } from '../helpers/lambda.js'

const STRICT =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

/** A Function URL GET as Lambda sends it (no IAM context: the console's files need no caller). */
function urlEvent(method: string, rawPath: string): FunctionUrlEvent {
  const domainName = 'abcdefghij.lambda-url.eu-central-1.on.aws'
  const http = { method, path: rawPath, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'test' }
  const requestContext = {
    ...{ accountId: '123456789012', apiId: 'abcdefghij', domainName, domainPrefix: 'abcdefghij', http },
    ...{ requestId: 'req-1', routeKey: '$default', stage: '$default', time: '01/Dec/2026:23:00:00 +0000', timeEpoch: 1_796_166_000_000 },
  }
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath,
    rawQueryString: '',
    headers: { host: domainName },
    isBase64Encoded: false,
    requestContext,
  }
}

describe('the console files', () => {
  it('are what console/build.ts makes from console/index.html, console.css and src/ (run npx tsx console/build.ts)', async () => {
    expect(await readFile(new URL('../../console/assets.ts', import.meta.url), 'utf8')).toBe(await consoleAssetsModule())
  }, 30_000)

  it('serve the page, the style sheet and the script with their types, the strict CSP and nosniff', () => {
    expect(CONSOLE_CSP).toBe(STRICT)
    const types: Record<string, string> = {
      '/console': 'text/html; charset=utf-8',
      '/console/': 'text/html; charset=utf-8',
      '/console/console.css': 'text/css; charset=utf-8',
      '/console/app.js': 'text/javascript; charset=utf-8',
    }
    for (const [path, type] of Object.entries(types)) {
      const res = consoleResponse('GET', path)
      expect(res.status, path).toBe(200)
      expect(res.headers).toMatchObject({ 'content-type': type, 'content-security-policy': STRICT, 'x-content-type-options': 'nosniff' })
      expect(res.body.length).toBeGreaterThan(100)
    }
    // No inline script or style in the page: the CSP would refuse it, and nothing needs it.
    const html = consoleResponse('GET', '/console').body
    expect(html).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>|<style|\sstyle=|\son[a-z]+=/i)
  })

  it('answer 404 for every other name, traversal included, and 405 for a write', () => {
    for (const path of [
      '/console/../package.json',
      '/console/%2e%2e/package.json',
      '/console/src/main.ts',
      '/console/assets.ts',
      '/console/app.js/',
    ])
      expect(consoleResponse('GET', path), path).toMatchObject({ status: 404, headers: { 'content-security-policy': STRICT } })
    expect(consoleResponse('POST', '/console')).toMatchObject({ status: 405, headers: { allow: 'GET, HEAD' } })
    expect(consoleResponse('HEAD', '/console/app.js')).toMatchObject({ status: 200, body: '' })
    expect(isConsolePath('/consoles')).toBe(false)
  })

  it('are served by the admin function even when its dependencies cannot be built (no database for a static file)', async () => {
    const handler = createHandler(async () => {
      throw new Error('no dependencies in this test')
    })
    const page = await handler(urlEvent('GET', '/console'), createContext())
    expect(page).toMatchObject({
      statusCode: 200,
      headers: { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': STRICT },
    })
    expect(page.body).toContain('/console/app.js')
    expect(await handler(urlEvent('GET', '/console/../x'), createContext())).toMatchObject({ statusCode: 404 })
  })
})
