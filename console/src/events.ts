// Events: filtered by state, target and time, paged with the API's cursor; a row opens the event.
// "Retry all matching" asks the API how many events the bulk call would take (a dry run with the very
// same body) and says that number before it is confirmed.
import { api, projectPath, type BulkResult, type EventJson } from './api.js'
import { h, replace, stateBadge, table, when } from './dom.js'
import { at, confirmed, failed, link, show, type PageContext } from './page.js'

const STATES = ['', 'created', 'retrying', 'processing', 'succeed', 'failed', 'stopped']
const PAGE = 50

type Page = { events: EventJson[]; nextCursor: string | null }

/** The listing's query from the console route's filters (times given as local date-times). */
function filterQuery(q: URLSearchParams): URLSearchParams {
  const out = new URLSearchParams()
  for (const key of ['state', 'target']) if (q.get(key)) out.set(key, q.get(key) ?? '')
  for (const key of ['since', 'until']) if (q.get(key)) out.set(key, new Date(q.get(key) ?? '').toISOString())
  return out
}

function filterForm(ctx: PageContext): HTMLFormElement {
  const field = (name: string, label: string, input: HTMLElement) => h('label', {}, label, input)
  const state = h(
    'select',
    { name: 'state' },
    ...STATES.map(s => h('option', { value: s, selected: ctx.query.get('state') === s }, s || 'any')),
  )
  const input = (name: string, type: string) => h('input', { name, type, value: ctx.query.get(name) ?? '' })
  const form = h(
    'form',
    { class: 'filters', 'aria-label': 'Filter events' },
    field('state', 'State', state),
    field('target', 'Target', input('target', 'text')),
    field('since', 'Changed since', input('since', 'datetime-local')),
    field('until', 'Changed until', input('until', 'datetime-local')),
    h('button', { type: 'submit' }, 'Filter'),
  )
  form.addEventListener('submit', e => {
    e.preventDefault()
    const q = new URLSearchParams()
    for (const [k, v] of new FormData(form)) if (typeof v === 'string' && v) q.set(k, v)
    location.hash = `#${at(ctx.project)}/events?${q}`
  })
  return form
}

function eventRow(ctx: PageContext, e: EventJson): HTMLTableRowElement {
  const route = `${at(ctx.project)}/event/${e.id}`
  const tr = h(
    'tr',
    { class: 'link', 'data-event': e.id },
    h('td', {}, link(e.id.slice(0, 8), route)),
    h('td', {}, stateBadge(e.state)),
    h('td', {}, e.target),
    h('td', { class: 'hide-narrow' }, e.trigger),
    h('td', {}, e.attempts),
    h('td', { class: 'hide-narrow' }, when(e.lastStateChange)),
    h('td', { class: 'hide-narrow' }, e.lastError ?? ''),
  )
  tr.addEventListener('click', () => (location.hash = `#${route}`))
  return tr
}

function bulkButton(ctx: PageContext, base: string, filter: URLSearchParams, reload: () => Promise<void>): HTMLButtonElement {
  const state = filter.get('state') || 'failed'
  // One body for the count and the retry: the number confirmed is the number the same filter takes.
  const body: Record<string, unknown> = { state }
  for (const key of ['target', 'since', 'until']) if (filter.get(key)) body[key] = filter.get(key)
  const counted = { n: 0 }
  return confirmed(
    'Retry all matching',
    async () => {
      const dry = await api<BulkResult>('POST', `${base}/retry`, { ...body, dryRun: true })
      counted.n = dry.matched
      const range = filter.get('since') || filter.get('until') ? ' created in that time range' : ''
      const more = dry.limitReached ? ` (the limit of one call; run it again for the rest)` : ''
      return `Retry ${dry.matched} ${state} events of ${ctx.project}${range}?${more}`
    },
    async () => {
      const r = await api<BulkResult>('POST', `${base}/retry`, body)
      await reload()
      return `Retried ${r.changed} events (counted ${counted.n}).`
    },
  )
}

/** Draws the Events page of ctx.project with its filters and a "More" button for the next page. */
export async function eventsPage(ctx: PageContext): Promise<void> {
  const title = `Events of ${ctx.project}`
  const base = `${projectPath(ctx.project)}/events`
  try {
    const filter = filterQuery(ctx.query)
    const tbodyRows: HTMLTableRowElement[] = []
    const grid = table(
      ['Event', 'State', 'Target', ['Trigger', 'hide-narrow'], 'Attempts', ['Changed', 'hide-narrow'], ['Last error', 'hide-narrow']],
      tbodyRows,
    )
    const body = grid.querySelector('tbody')
    const more = h('button', { type: 'button', hidden: true }, 'More')
    const shown = h('p', { class: 'count' })
    let cursor: string | null = null
    const load = async () => {
      const q = new URLSearchParams(filter)
      q.set('limit', String(PAGE))
      if (cursor) q.set('cursor', cursor)
      const page = await api<Page>('GET', `${base}?${q}`)
      for (const e of page.events) body?.appendChild(eventRow(ctx, e))
      cursor = page.nextCursor
      more.hidden = !cursor
      shown.textContent = `${body?.childElementCount ?? 0} events shown${cursor ? '; more with "More"' : ''}.`
    }
    more.addEventListener('click', () => void load().catch(e => failed(ctx.root, title, e)))
    const canBulk = ctx.can.admin && ['', 'failed', 'retrying'].includes(filter.get('state') ?? '')
    const reload = async () => {
      if (body) replace(body)
      cursor = null
      await load()
    }
    const bulk = canBulk ? bulkButton(ctx, base, filter, reload) : ''
    show(ctx.root, title, filterForm(ctx), h('div', { class: 'actions' }, bulk), grid, more, shown)
    await load()
  } catch (e) {
    failed(ctx.root, title, e)
  }
}
