// The web console in a real browser: Debian's chromium driven by playwright-core against
// the local stack with real Postgres and a real receiver. One browser, one stack, the cases in order:
// they share the events they make. Without /usr/bin/chromium the browser cases skip, loudly.
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createToken } from '../../lib/db/tokens.js'
import { startLocalStack, type LocalStack } from '../../local/stack.js'
import { insertEvents } from '../helpers/events.js'
import { useDatabase, useReceiver } from '../helpers/harness.js'
import { logCapture } from '../helpers/runtime.js'
import { until } from '../helpers/wait.js'
import { TX } from '../fixtures/schemas.js'
import type { TrendsJson as Trends } from '../../lib/admin/rest/trends.js'

const CHROMIUM = '/usr/bin/chromium'
const hasChromium = existsSync(CHROMIUM)
if (!hasChromium)
  console.warn(
    '\n*** SKIPPED: /usr/bin/chromium not installed (apt-get install chromium; .ci/run installs it). The console was NOT tested in a browser. ***\n',
  )
// CONSOLE_SCREENSHOTS=1 refreshes docs/images/console-*.png; otherwise the shots go to a temporary directory.
const SHOTS = process.env['CONSOLE_SCREENSHOTS'] ? join(import.meta.dirname, '../../docs/images') : undefined

const HOSTILE_TITLE = '<img src=x onerror="window.__pwned=1">'
const HOSTILE_BODY = '</script><script>window.__pwned=1</script>'
const BULK = 100
const PAUSED_DUE = 3

const db = useDatabase()
const rx = useReceiver()
let stack: LocalStack
let context: BrowserContext | undefined
let profile = ''
let healthy = false
let hostileId = ''
let viewerToken = ''
const requested: string[] = []
const problems: string[] = []

type Json = Record<string, unknown>
async function call(method: string, path: string, token: string, body?: unknown): Promise<{ status: number; json: Json }> {
  const res = await fetch(stack.url + path, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(20_000),
  })
  const text = await res.text()
  return { status: res.status, json: text ? (JSON.parse(text) as Json) : {} }
}

const schema = () => ({
  targets: {
    orders: { type: 'webhook', name: 'orders', url: `${rx.url}/orders`, maxAttempts: 1 },
    crm: { type: 'webhook', name: 'crm', url: `${rx.url}/crm`, maxAttempts: 1 },
  },
  triggers: {
    order: { type: 'basic', name: 'order', target: 'orders', entity: 'Order', create: true, delete: false, update: false },
    contact: { type: 'basic', name: 'contact', target: 'crm', entity: 'Contact', create: true, delete: false, update: false },
  },
})

const payload = (id: number, values: Json = { title: `Order ${id}` }) => ({ operation: 'create', entity: 'Order', id, values })
const failedCount = async () =>
  ((await call('GET', '/v1/projects/shop/events?state=failed&limit=1000', stack.adminToken)).json['events'] as unknown[]).length

beforeAll(async () => {
  stack = await startLocalStack({
    // The breaker off: the receiver's 500s must not pause orders, so a retry is delivered at once.
    env: { DATABASE_URL: db.url, LOG_LEVEL: 'error', BREAKER_FAILURES: '0' },
    port: 0,
    sweepIntervalMs: 3_600_000,
    logSink: logCapture().sink,
  })
  rx.respond((_, res) => {
    res.statusCode = healthy ? 200 : 500
    res.setHeader('content-type', 'text/html')
    res.end(healthy ? 'ok' : `receiver down ${HOSTILE_TITLE}`)
  })
  for (const project of ['shop', 'other'])
    expect((await call('PUT', `/v1/projects/${project}/schema`, stack.adminToken, schema())).status).toBe(200)
  expect((await call('POST', '/v1/projects/shop/targets/crm/pause', stack.adminToken)).status).toBe(200)
  const events = Array.from({ length: BULK }, (_, i) => ({ trigger: 'order', payload: payload(i + 1) }))
  expect((await call('POST', '/v1/projects/shop/events', stack.adminToken, { transactionId: TX, events })).status).toBe(200)
  await until('the 100 failed once', async () => (await failedCount()) === BULK, 30_000)
  // The hostile one last, so it is the newest change: the first row of the failed listing.
  const hostile = await call('POST', '/v1/projects/shop/events', stack.adminToken, {
    transactionId: TX,
    events: [{ trigger: 'order', payload: payload(0, { title: HOSTILE_TITLE, body: HOSTILE_BODY }) }],
  })
  hostileId = (hostile.json['eventIds'] as string[])[0] ?? ''
  await until('the hostile one failed too', async () => (await failedCount()) === BULK + 1, 30_000)
  // Three contacts wait at the paused crm target: due, but held by the pause.
  const contacts = Array.from({ length: PAUSED_DUE }, (_, i) => ({
    trigger: 'contact',
    payload: { operation: 'create', entity: 'Contact', id: i, values: {} },
  }))
  expect((await call('POST', '/v1/projects/shop/events', stack.adminToken, { transactionId: TX, events: contacts })).status).toBe(200)
  viewerToken = (await createToken(db.pool, { project: 'shop', role: 'viewer' })).token
  if (!hasChromium) return
  profile = await mkdtemp(join(tmpdir(), 'console-chromium-'))
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-quic',
    ],
  })
  context.on('request', r => void requested.push(r.url()))
  context.on('console', m => {
    if (m.type() === 'error') problems.push(m.text())
  })
  context.on('weberror', e => void problems.push(e.error().message))
}, 90_000)

afterAll(async () => {
  await context?.close()
  if (profile) await rm(profile, { recursive: true, force: true })
  await stack?.stop()
})

/**
 * Writes `n` events of project `other` already resolved as `state` `ago` in the past, in one
 * transaction, so no dispatch ever sees them due: the history the recent figures are computed from.
 */
async function resolvedEvents(target: string, n: number, state: 'succeed' | 'failed', ago: string): Promise<void> {
  const client = await db.pool.connect()
  try {
    await client.query('BEGIN')
    const ctx = { project: 'other', transactionId: TX, stage: null, schemaVersion: 1, identityId: null, ipAddress: null, userAgent: null }
    const rows = Array.from({ length: n }, (_, i) => ({ id: randomUUID(), trigger: 'order', target, priority: 0, payload: payload(i) }))
    const ids = await insertEvents(client, ctx, rows)
    await client.query(
      `UPDATE actions_event SET state = $2::actions_event_state, num_retries = 1,
         last_state_change = now() - $3::interval, resolved_at = now() - $3::interval,
         failed_at = CASE WHEN $2 = 'failed' THEN now() - $3::interval END WHERE id = ANY($1::uuid[])`,
      [ids, state, ago],
    )
    await client.query('COMMIT')
  } finally {
    client.release()
  }
}

/** A new tab (its own sessionStorage) logged in with `token` by keyboard only. */
async function loggedIn(token: string): Promise<Page> {
  if (!context) throw new Error('no browser')
  const page = await context.newPage()
  const res = await page.goto(`${stack.url}/console`)
  expect(res?.headers()['content-security-policy']).toContain("script-src 'self'")
  // The form focuses its field: typing and Enter log in.
  await page.locator('#token:focus').waitFor()
  await page.keyboard.type(token)
  await page.keyboard.press('Enter')
  await page.locator('h1', { hasText: 'Projects' }).waitFor()
  return page
}

/** Answers the next confirm() with OK and returns its question. */
const confirmNext = (page: Page) =>
  new Promise<string>(resolve =>
    page.once('dialog', d => {
      resolve(d.message())
      void d.accept()
    }),
  )

describe('the console on the local stack', () => {
  it('tells the caller who it is and which projects it may see (GET /v1/whoami, /v1/projects)', async () => {
    expect((await call('GET', '/v1/whoami', stack.adminToken)).json).toEqual({ kind: 'system' })
    expect((await call('GET', '/v1/whoami', viewerToken)).json).toEqual({ kind: 'token', project: 'shop', role: 'viewer' })
    expect((await call('GET', '/v1/projects', stack.adminToken)).json).toEqual({ projects: ['other', 'shop'] })
    expect((await call('GET', '/v1/projects', viewerToken)).json).toEqual({ projects: ['shop'] })
    expect((await call('GET', '/v1/whoami', 'actions_not-a-token-at-all-0000')).status).toBe(401)
  })

  it('serves only its own files: a traversal through the stack is a 404', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${stack.url}/console/../package.json`, { path: '/console/../package.json' }, res => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on('error', reject)
      req.end()
    })
    expect(status).toBe(404)
  })

  it.skipIf(!hasChromium)(
    'logs in, shows the paused target and its reason, opens the failed hostile event as text, retries it to the receiver',
    async () => {
      const page = await loggedIn(stack.adminToken)
      const shop = page.locator('[data-project="shop"]')
      await expect.poll(() => shop.locator('[data-field="paused"]').textContent()).toContain('crm: paused, operator')
      await expect.poll(() => shop.locator('[data-field="failed"]').textContent()).toBe(String(BULK + 1))
      // "Due" means one thing on both pages: every due event, the part at paused targets said beside it.
      expect(await shop.locator('[data-field="due"]').textContent()).toBe(String(PAUSED_DUE))
      expect(await shop.locator('[data-field="due-paused"]').textContent()).toBe(String(PAUSED_DUE))
      expect(await shop.locator('dt', { hasText: 'of them at paused targets' }).count()).toBe(1)
      // Times in UTC with their age.
      expect(await shop.locator('time').first().textContent()).toMatch(
        /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \((\d+ (s|min|h|d) ago|in \d+ (s|min|h|d))\)$/,
      )
      await page.screenshot({ path: join(SHOTS ?? profile, 'console-projects.png') })

      await page.goto(`${stack.url}/console#/p/shop/targets`)
      const crm = page.locator('tr[data-target="crm"]')
      await expect.poll(() => crm.textContent()).toContain('paused by an operator')
      expect(await crm.locator('[data-field="due"]').textContent()).toBe(String(PAUSED_DUE))
      // crm never got a request: said so, not "last batch ok".
      expect(await crm.locator('[data-field="run"]').textContent()).toBe('never sent')
      expect(await page.locator('main p.count').textContent()).toContain('at a paused target too')
      expect(await crm.getByRole('button', { name: 'Resume' }).count()).toBe(1)
      // The page refreshes every 5 s; a keyboard user's focus on Resume survives the redraw.
      await crm.getByRole('button', { name: 'Resume' }).focus()
      await page.evaluate(`document.querySelector('main table').dataset.old = '1'`)
      await expect.poll(() => page.evaluate(`!document.querySelector('main table')?.dataset.old`), { timeout: 10_000 }).toBe(true)
      expect(await page.evaluate(`document.activeElement?.textContent + '@' + document.activeElement?.closest('tr')?.dataset.target`)).toBe(
        'Resume@crm',
      )

      // By keyboard: Tab from the filter form to the hostile event's link, Enter opens it.
      await page.goto(`${stack.url}/console#/p/shop/events?state=failed`)
      await page.locator(`tr[data-event="${hostileId}"]`).waitFor()
      for (let i = 0; i < 80; i++) {
        if (await page.evaluate(`document.activeElement?.closest('tr')?.dataset.event === ${JSON.stringify(hostileId)}`)) break
        await page.keyboard.press('Tab')
      }
      await page.keyboard.press('Enter')
      const pre = page.locator('pre.payload')
      await pre.waitFor()
      // Pretty-printed JSON: the strings as JSON writes them, quotes escaped, every character shown.
      expect(await pre.textContent()).toContain(`"title": ${JSON.stringify(HOSTILE_TITLE)}`)
      expect(await pre.textContent()).toContain(`"body": ${JSON.stringify(HOSTILE_BODY)}`)
      const attempt = page.locator('tr.attempt').first()
      expect(await attempt.textContent()).toContain('HTTP 500')
      expect(await attempt.textContent()).toMatch(/\d+ ms/)
      expect(await attempt.locator('pre.response').textContent()).toContain(`receiver down ${HOSTILE_TITLE}`)
      expect(await page.locator('main img').count()).toBe(0)
      expect(await page.evaluate('typeof window.__pwned')).toBe('undefined')
      // The payload is above the fold of a 1280×800 window: its first lines show without scrolling.
      const box = await pre.boundingBox()
      expect(box?.y ?? 1e9).toBeLessThan(500)
      await page.screenshot({ path: join(SHOTS ?? profile, 'console-event.png') })

      // At 390 px the page does not scroll sideways: tables and text wrap or scroll in their own box.
      await page.setViewportSize({ width: 390, height: 800 })
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390)
      await page.setViewportSize({ width: 1280, height: 800 })

      healthy = true
      const question = confirmNext(page)
      await page.getByRole('button', { name: 'Retry', exact: true }).click()
      expect(await question).toBe(`Retry event ${hostileId}?`)
      // The receiver forgets its requests before each test: this one is the retry's delivery.
      await until('the receiver gets the retried event', () => rx.eventIds().includes(hostileId), 20_000)
      await page.locator('dl .state', { hasText: 'succeed' }).waitFor({ timeout: 20_000 })
      expect(await page.evaluate('typeof window.__pwned')).toBe('undefined')
      await page.close()
    },
    60_000,
  )

  it.skipIf(!hasChromium)(
    "shows each target's recent success rate in words, and the failures of the last 24 h only",
    async () => {
      // orders: 3 delivered and 1 failed within the hour, 1 failed two days ago (outside both windows); crm: nothing.
      await resolvedEvents('orders', 3, 'succeed', '5 minutes')
      await resolvedEvents('orders', 1, 'failed', '20 minutes')
      await resolvedEvents('orders', 1, 'failed', '2 days')
      const page = await loggedIn(stack.adminToken)
      await expect.poll(() => page.locator('[data-project="other"] [data-field="failed"]').textContent()).toBe('1')
      await page.goto(`${stack.url}/console#/p/other/targets`)
      const rate = (target: string) => page.locator(`tr[data-target="${target}"] [data-field="rate"]`)
      await expect.poll(() => rate('orders').textContent()).toBe('75 % (3 of 4)')
      // Below 90 %: marked by a class too, but the words carry it.
      expect(await rate('orders').getAttribute('class')).toBe('rate-low')
      expect(await rate('crm').textContent()).toBe('no recent deliveries')
      expect(await page.locator('main p.count').textContent()).toContain('resolved in the last 1 h')
      await page.close()
    },
    60_000,
  )

  it.skipIf(!hasChromium)(
    'retries all 100 matching failed events after showing their count',
    async () => {
      const page = await loggedIn(stack.adminToken)
      await page.goto(`${stack.url}/console#/p/shop/events?state=failed&target=orders`)
      // Pages of 50 through the API's cursor: "More" appends the next one, then hides.
      await expect.poll(() => page.locator('tbody tr').count()).toBe(50)
      await page.getByRole('button', { name: 'More' }).click()
      await expect.poll(() => page.locator('tbody tr').count()).toBe(BULK)
      // A full page may still carry a cursor; the page after the last is empty and "More" goes.
      const more = page.getByRole('button', { name: 'More' })
      if (await more.isVisible()) await more.click()
      await expect.poll(() => more.isHidden()).toBe(true)
      expect(await page.locator('tbody tr').count()).toBe(BULK)
      const question = confirmNext(page)
      await page.getByRole('button', { name: 'Retry all matching' }).click()
      expect(await question).toBe(`Retry ${BULK} failed events of shop?`)
      await page.locator('#status', { hasText: `Retried ${BULK} events` }).waitFor()
      await until('the receiver gets all 100 again', () => new Set(rx.eventIds()).size === BULK, 30_000)
      await until('none is failed any more', async () => (await failedCount()) === 0, 30_000)
      await page.close()
    },
    60_000,
  )

  it.skipIf(!hasChromium)(
    'shows a viewer no write button, and its forced write gets 403',
    async () => {
      const page = await loggedIn(viewerToken)
      expect(await page.locator('#who').textContent()).toBe('shop · viewer')
      await page.goto(`${stack.url}/console#/p/shop/targets`)
      await page.locator('tr[data-target="crm"]').waitFor()
      expect(await page.locator('main button').count()).toBe(0)
      await page.goto(`${stack.url}/console#/p/shop/events`)
      await page.locator('tbody tr').first().waitFor()
      expect(await page.getByRole('button', { name: 'Retry all matching' }).count()).toBe(0)
      await page.goto(`${stack.url}/console#/p/shop/event/${hostileId}`)
      await page.locator('pre.payload').waitFor()
      expect(await page.locator('main button').count()).toBe(0)
      // The page's own fetch, with the token it holds: the API, not the console, refuses it.
      const status = await page.evaluate(`(async () => {
        const token = sessionStorage.getItem('actions-console-token') ?? ''
        const res = await fetch('/v1/projects/shop/events/${hostileId}/retry', { method: 'POST', headers: { authorization: 'Bearer ' + token } })
        return res.status
      })()`)
      expect(status).toBe(403)
      await page.close()
    },
    60_000,
  )

  it.skipIf(!hasChromium)(
    "charts a target's last 24 h from real deliveries with the failure onset visible, and keeps a selection across a refresh",
    async () => {
      const target = (name: string) => ({ type: 'webhook', name, url: `${rx.url}/${name}`, maxAttempts: 1 })
      const trigger = (name: string, to: string) => ({
        type: 'basic',
        name,
        target: to,
        entity: name,
        create: true,
        delete: false,
        update: false,
      })
      const trendSchema = {
        targets: { hook: target('hook'), idle: target('idle') },
        triggers: { ping: trigger('ping', 'hook'), nap: trigger('nap', 'idle') },
      }
      expect((await call('PUT', '/v1/projects/trend/schema', stack.adminToken, trendSchema)).status).toBe(200)
      // Ids from `from` on: an event's id derives from the producer's id, so a repeated one writes nothing.
      const pings = (n: number, from: number) => ({
        transactionId: TX,
        events: Array.from({ length: n }, (_, i) => ({
          trigger: 'ping',
          payload: { operation: 'create', entity: 'ping', id: i, values: {} },
        })),
      })
      const inState = async (state: string) =>
        ((await call('GET', `/v1/projects/trend/events?state=${state}&limit=1000`, stack.adminToken)).json['events'] as unknown[]).length
      // The receiver is reset before each test: it answers by `healthy` again from here.
      rx.respond((_, res) => {
        res.statusCode = healthy ? 200 : 500
        res.end()
      })
      healthy = true
      expect((await call('POST', '/v1/projects/trend/events', stack.adminToken, pings(6, 0))).status).toBe(200)
      // The recorder writes the rollup in its own statement just after the events' states: both waits
      // below are for the rollup, so no late row lands in the minute the test moves or reads.
      const rolled = async (column: 'delivered' | 'events_failed') =>
        (
          await db.pool.query<{ n: number }>(
            `SELECT coalesce(sum(${column}), 0)::int AS n FROM actions_target_minute WHERE project = 'trend' AND target = 'hook'`,
          )
        ).rows[0]?.n
      await until('six delivered', async () => (await inState('succeed')) === 6 && (await rolled('delivered')) === 6, 20_000)
      // The deliveries' minutes are moved 10 minutes back, so that the failures below fall in a later
      // minute of the chart without the test waiting 10 minutes; the rows are the recorder's own.
      await db.pool.query(`UPDATE actions_target_minute SET minute = minute - interval '10 minutes' WHERE project = 'trend'`)
      healthy = false
      expect((await call('POST', '/v1/projects/trend/events', stack.adminToken, pings(4, 6))).status).toBe(200)
      await until('four failed', async () => (await inState('failed')) === 4 && (await rolled('events_failed')) === 4, 20_000)
      // Every resolving statement dates the resolution and the last change alike: the listing pages by it.
      const { rows: odd } = await db.pool.query(
        `SELECT count(*)::int AS n FROM actions_event WHERE resolved_at IS NOT NULL AND resolved_at <> last_state_change
            OR failed_at IS NOT NULL AND failed_at <> resolved_at`,
      )
      expect(odd[0]?.n).toBe(0)

      const res = await fetch(`${stack.url}/v1/projects/trend/trends`, {
        headers: { authorization: `Bearer ${stack.adminToken}` },
        signal: AbortSignal.timeout(20_000),
      })
      const trends = (await res.json()) as Trends
      const hook = trends.targets.find(t => t.target === 'hook')
      const sum = (k: 'delivered' | 'failedAttempts' | 'eventsFailed' | 'requests') => hook?.points.reduce((n, p) => n + p[k], 0)
      expect([sum('delivered'), sum('failedAttempts'), sum('eventsFailed'), sum('requests')]).toEqual([6, 4, 4, 10])
      expect(trends.targets.map(t => t.target)).toEqual(['hook', 'idle'])
      expect(trends.targets[1]?.points).toEqual([])
      const onset = hook?.points.find(p => p.failedAttempts > 0)
      const lastOk = hook?.points.findLast(p => p.delivered > 0)
      if (!onset || !lastOk) throw new Error('expected a delivering and a failing minute')
      expect(Date.parse(onset.minute) - Date.parse(lastOk.minute)).toBeGreaterThanOrEqual(9 * 60_000)
      expect(onset.p50Ms).toBeGreaterThan(0)

      const page = await loggedIn(stack.adminToken)
      await page.goto(`${stack.url}/console#/p/trend/targets`)
      const figure = page.locator('figure[data-trend="hook"]')
      await expect.poll(() => figure.locator('canvas').count()).toBe(2)
      const caption = await figure.locator('figcaption').textContent()
      expect(caption).toContain('6 delivered, 4 failed attempts, 4 events failed')
      expect(caption).toContain(`Failing since ${new Date(onset.minute).toISOString().slice(0, 19).replace('T', ' ')} UTC`)
      expect(await page.locator('tr[data-target="idle"] [data-field="run"]').textContent()).toBe('never sent')
      expect(await page.locator('figure[data-trend="idle"] figcaption').textContent()).toBe('No request in the last 24 h.')
      // On the canvas: the highest point of the failed-attempt line lies right of the deliveries' peak.
      const peaks = (await page.evaluate(`(() => {
        const near = (d, i, c) => Math.abs(d[i] - c[0]) < 40 && Math.abs(d[i + 1] - c[1]) < 40 && Math.abs(d[i + 2] - c[2]) < 40 && d[i + 3] > 200
        const canvas = document.querySelector('figure[data-trend="hook"] canvas')
        const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data
        const top = { red: [1e9, -1, 0], green: [1e9, -1, 0] }
        for (let i = 0; i < d.length; i += 4) {
          const x = (i / 4) % canvas.width, y = Math.floor(i / 4 / canvas.width)
          for (const [k, c] of [['red', [179, 38, 30]], ['green', [26, 127, 55]]])
            if (near(d, i, c)) { top[k][2]++; if (y < top[k][0]) { top[k][0] = y; top[k][1] = x } }
        }
        return top
      })()`)) as { red: [number, number, number]; green: [number, number, number] }
      expect(peaks.red[2]).toBeGreaterThan(0)
      expect(peaks.green[2]).toBeGreaterThan(0)
      expect(peaks.red[1]).toBeGreaterThan(peaks.green[1])
      await page.screenshot({ path: join(SHOTS ?? profile, 'console-targets.png'), fullPage: true })

      await page.goto(`${stack.url}/console`)
      const card = page.locator('[data-project="trend"]')
      await expect.poll(() => card.locator('figure canvas').count()).toBe(2)
      expect(await card.locator('figcaption').textContent()).toContain('Failing since')

      // A selection in the payload survives the refreshes (3 s) while the event changes underneath.
      const failed = (await call('GET', '/v1/projects/trend/events?state=failed&limit=1', stack.adminToken)).json['events'] as Array<{
        id: string
      }>
      const id = failed[0]?.id ?? ''
      await page.goto(`${stack.url}/console#/p/trend/event/${id}`)
      const pre = page.locator('pre.payload')
      await pre.waitFor()
      await page.evaluate(`(() => {
        const pre = document.querySelector('pre.payload')
        pre.dataset.old = '1'
        const range = document.createRange()
        range.selectNodeContents(pre)
        getSelection().removeAllRanges()
        getSelection().addRange(range)
      })()`)
      const selected = await page.evaluate('getSelection().toString()')
      expect(selected).toContain('"entity": "ping"')
      expect((await call('POST', `/v1/projects/trend/events/${id}/stop`, stack.adminToken)).status).toBe(200)
      await page.waitForTimeout(4_500)
      expect(await page.evaluate('getSelection().toString()')).toBe(selected)
      expect(await page.evaluate(`document.querySelector('pre.payload').dataset.old`)).toBe('1')
      expect(await page.locator('#status').textContent()).toContain('Refresh paused while text is selected')
      expect(await page.locator('p.summary .state').textContent()).toBe('failed')
      // Selection gone: the next refresh shows the change, and says nothing of a pause any more.
      await page.evaluate('getSelection().removeAllRanges()')
      await expect.poll(() => page.locator('p.summary .state').textContent(), { timeout: 10_000 }).toBe('stopped')
      expect(await page.locator('#status').textContent()).not.toContain('Refresh paused')
      await page.close()
    },
    90_000,
  )

  it.skipIf(!hasChromium)('made every request to its own origin, never with the token in a URL, and broke no CSP rule', () => {
    const origin = new URL(stack.url).origin
    expect(requested.length).toBeGreaterThan(10)
    for (const url of requested) {
      expect(new URL(url).origin, url).toBe(origin)
      expect(url).not.toContain(stack.adminToken)
      expect(url).not.toContain(viewerToken)
    }
    // The forced viewer write's 403 is logged by the browser as a failed resource; nothing else may be.
    expect(problems.filter(p => !/status of 403/.test(p))).toEqual([])
  })
})
