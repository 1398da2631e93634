// One event: a line of what matters, its payload pretty-printed (above the fold: what an operator
// copies out), its meta, every attempt (status, duration, the stored response excerpt), and retry
// and stop for roles that may. All of it as text. A refresh redraws only when the event changed.
import { api, projectPath, type Attempt, type EventDetail } from './api.js'
import { h, stateBadge, table, when, type Child } from './dom.js'
import { at, confirmed, failed, keepingFocus, link, show, unchanged, type PageContext } from './page.js'

function meta(e: EventDetail): HTMLDListElement {
  const pairs: Array<[string, Child]> = [
    ['State', e.state],
    ['Target', e.target],
    ['Trigger', e.trigger],
    ['Attempts', e.attempts],
    ['Created', when(e.createdAt)],
    ['Last change', when(e.lastStateChange)],
    ['Due at', when(e.visibleAt)],
    ['Resolved', when(e.resolvedAt)],
    ['Transaction', e.transactionId],
    ['Stage', e.stage ?? '—'],
    ['Priority', e.priority],
    ['Schema version', e.schemaVersion],
    ['Identity', e.identityId ?? '—'],
    ['IP address', e.ipAddress ?? '—'],
    ['User agent', e.userAgent ?? '—'],
  ]
  return h(
    'dl',
    { 'aria-label': 'Meta' },
    ...pairs.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, k === 'State' ? stateBadge(e.state) : v)]),
  )
}

function attemptRow(a: Attempt, i: number): HTMLTableRowElement {
  const status = a.ok ? 'ok' : a.code !== undefined ? `HTTP ${a.code}` : 'failed'
  return h(
    'tr',
    { class: 'attempt' },
    h('td', {}, i + 1),
    h('td', {}, status),
    h('td', {}, a.durationMs === undefined ? '—' : `${a.durationMs} ms`),
    h('td', {}, a.errorMessage ?? ''),
    h('td', {}, a.response ? h('pre', { class: 'response' }, a.response) : '—'),
  )
}

/** Draws the page of one event. */
export async function eventPage(ctx: PageContext, id: string): Promise<void> {
  const title = `Event ${id}`
  const path = `${projectPath(ctx.project)}/events/${encodeURIComponent(id)}`
  const same = unchanged()
  const draw = async (force = false) => {
    try {
      const e = await api<EventDetail>('GET', path)
      if (same(e) && !force) return
      const act = (verb: 'retry' | 'stop') =>
        confirmed(
          verb === 'retry' ? 'Retry' : 'Stop',
          () => `${verb === 'retry' ? 'Retry' : 'Stop'} event ${id}?`,
          async () => {
            await api('POST', `${path}/${verb}`)
            await draw(true)
            return verb === 'retry' ? 'Retried: it is due now.' : 'Stopped.'
          },
          verb === 'stop',
        )
      show(
        ctx.root,
        title,
        h('p', {}, link(`← Events of ${ctx.project}`, `${at(ctx.project)}/events`)),
        ctx.can.admin ? h('div', { class: 'actions' }, act('retry'), act('stop')) : '',
        h(
          'p',
          { class: 'summary' },
          stateBadge(e.state),
          ` ${e.target} · ${e.trigger} · ${e.attempts} attempt${e.attempts === 1 ? '' : 's'} · changed `,
          when(e.lastStateChange),
        ),
        h('h2', {}, 'Payload'),
        h('pre', { class: 'payload' }, JSON.stringify(e.payload, null, 2)),
        h('h2', {}, 'Meta'),
        meta(e),
        h('h2', {}, `Attempts${e.logDropped ? ` (${e.logDropped} between the first and the last not kept)` : ''}`),
        table(['#', 'Status', 'Duration', 'Error', 'Response'], e.log.map(attemptRow)),
      )
    } catch (err) {
      failed(ctx.root, title, err)
    }
  }
  await draw()
  // A retried event changes within seconds: the page follows it.
  ctx.every(3000, () => keepingFocus(ctx.root, () => draw()))
}
