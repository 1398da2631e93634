// Targets of a project: state in words (running; paused: down / needs operator, since, next probe),
// the backlog, the recent success rate, the failure run; pause and resume behind a confirmation, for
// roles that may.
import { api, projectPath, type TargetJson, type Targets, type Trends } from './api.js'
import { trendCharts } from './charts.js'
import { age, h, replace, stateBadge, table, when, type Child } from './dom.js'
import { at, confirmed, errorText, keepingFocus, link, show, type PageContext } from './page.js'

const REFRESH_MS = 5000

function stateCell(t: TargetJson): HTMLTableCellElement {
  if (!t.pause) return h('td', {}, stateBadge('running'))
  // down: the engine probes and resumes it; misconfigured: an operator must fix it; operator: paused by hand.
  const why = t.pause.kind === 'down' ? 'down' : t.pause.kind === 'operator' ? 'by an operator' : 'needs operator'
  return h(
    'td',
    {},
    stateBadge('paused'),
    t.pause.kind === 'misconfigured' ? ` ${why}: ${t.pause.label}` : ` ${why}`,
    h('br'),
    'since ',
    when(t.pause.since),
    t.pause.probeAt ? ', next probe ' : '',
    t.pause.probeAt ? when(t.pause.probeAt) : '',
  )
}

/**
 * The share of the target's recently resolved events that were delivered, in words: "75 % (3 of 4)".
 * Rounded down, from the counts, so a single failure never reads as 100 %.
 */
function rateText(recent: TargetJson['recent']): string {
  const total = recent.succeeded + recent.failed
  if (total === 0) return 'no recent deliveries'
  const tenths = Math.floor((recent.succeeded * 1000) / total)
  return `${tenths % 10 === 0 ? tenths / 10 : (tenths / 10).toFixed(1)} % (${recent.succeeded} of ${total})`
}

/** The rate's cell: the words always, a class only repeating them (below 90 % is marked). */
function rateCell(t: TargetJson): HTMLTableCellElement {
  const low = t.recent.successRate !== null && t.recent.successRate < 0.9
  return h('td', { 'data-field': 'rate', class: low ? 'rate-low' : undefined }, rateText(t.recent))
}

function row(ctx: PageContext, t: TargetJson, redraw: () => Promise<void>): HTMLTableRowElement {
  const path = `${projectPath(ctx.project)}/targets/${encodeURIComponent(t.target)}`
  const act = (verb: 'pause' | 'resume') =>
    confirmed(
      verb === 'pause' ? 'Pause' : 'Resume',
      () => `${verb === 'pause' ? 'Pause' : 'Resume'} target ${t.target} of ${ctx.project}?`,
      async () => {
        await api('POST', `${path}/${verb}`)
        await redraw()
        return `${t.target}: ${verb === 'pause' ? 'paused' : 'resumed'}.`
      },
      verb === 'pause',
    )
  return h(
    'tr',
    { 'data-target': t.target },
    h(
      'th',
      { scope: 'row' },
      link(t.target, `${at(ctx.project)}/events?target=${encodeURIComponent(t.target)}`),
      t.inSchema ? '' : ' (not in schema)',
    ),
    stateCell(t),
    h('td', { 'data-field': 'due' }, t.due),
    h('td', {}, age(t.due ? t.oldestDueAgeSeconds : null)),
    rateCell(t),
    h('td', { class: 'hide-narrow', 'data-field': 'run' }, ...failureRun(t)),
    h('td', {}, ctx.can.admin ? (t.state === 'paused' ? act('resume') : act('pause')) : ''),
  )
}

/** The failure run in words: failing since when, or the last batch's time, or that it never sent one. */
function failureRun(t: TargetJson): Child[] {
  if (t.consecutiveFailures) return [`${t.consecutiveFailures} failed in a row since `, when(t.failingSince)]
  if (!t.lastRequestAt) return ['never sent']
  return ['last batch ok, ', when(t.lastRequestAt)]
}

/** What the success column is computed over, as the API says it. */
function windowNote(w: Targets['recentWindow']): string {
  const span = w.seconds % 3600 === 0 ? `${w.seconds / 3600} h` : `${Math.round(w.seconds / 60)} min`
  const cut = w.limitReached ? ` (only the newest ${w.maxEvents} of the project: more were resolved)` : ''
  return `Due: events whose time has come and that no delivery holds, at a paused target too. Success: events delivered of those resolved in the last ${span}, stopped ones not counted${cut}.`
}

/** Draws the Targets page of ctx.project, refreshed every few seconds; the charts are fed in place. */
export async function targetsPage(ctx: PageContext): Promise<void> {
  const title = `Targets of ${ctx.project}`
  const list = h('div')
  const note = h('p', { class: 'count' })
  const chartBox = h('div', { class: 'trends', 'aria-label': 'Trends of the last 24 h' })
  show(ctx.root, title, list, note, h('h2', {}, 'Last 24 h, per minute (UTC)'), chartBox)
  const charts = trendCharts(chartBox)
  ctx.onLeave(() => charts.destroy())
  const draw = async () => {
    try {
      const p = projectPath(ctx.project)
      const [{ targets, recentWindow }, trends] = await Promise.all([
        api<Targets>('GET', `${p}/targets`),
        api<Trends>('GET', `${p}/trends`),
      ])
      const head: Array<string | [string, string]> = [
        'Target',
        'State',
        'Due',
        'Oldest due',
        'Success (1 h)',
        ['Failure run', 'hide-narrow'],
        '',
      ]
      replace(
        list,
        table(
          head,
          targets.map(t => row(ctx, t, draw)),
        ),
      )
      note.textContent = windowNote(recentWindow)
      const byTarget = new Map(trends.targets.map(s => [s.target, s]))
      charts.update(
        trends,
        targets.map(t => byTarget.get(t.target) ?? { target: t.target, points: [] }),
      )
    } catch (e) {
      replace(list, h('p', { class: 'error', role: 'alert' }, errorText(e)))
    }
  }
  await draw()
  ctx.every(REFRESH_MS, () => keepingFocus(ctx.root, draw))
}
