// Projects: each project the caller may see, with its backlog, recent failures, paused targets,
// dispatch heartbeat and a chart of its last 24 h, refreshed every few seconds without a reload. Each
// card stays where it is across refreshes: its figures are redrawn, its chart is fed in place.
import { api, projectPath, type Stats, type TargetJson, type Trends } from './api.js'
import { trendCharts } from './charts.js'
import { age, h, replace, utc, when } from './dom.js'
import { at, errorText, keepingFocus, link, show, type PageContext } from './page.js'

/** How often the page refreshes: an operator watching a backlog drain sees it move. */
const REFRESH_MS = 5000

type Card = { el: HTMLElement; body: HTMLElement; charts: ReturnType<typeof trendCharts> }

function figures(project: string, stats: Stats, targets: TargetJson[]): HTMLElement {
  const paused = targets.filter(t => t.state === 'paused')
  // The API counts them (the failed index over 24 h, capped): "10000+" past the cap.
  const failedCount = `${stats.failedLast24h}${stats.failedLast24hCapped ? '+' : ''}`
  return h(
    'dl',
    {},
    // "Due" as the Targets page counts it: every due event; the part a pause holds is said beside it.
    h('dt', {}, 'Due'),
    h('dd', { 'data-field': 'due' }, stats.due),
    h('dt', {}, 'of them at paused targets'),
    h('dd', { 'data-field': 'due-paused' }, stats.dueAtPausedTargets),
    h('dt', {}, 'Oldest due'),
    h('dd', {}, age(stats.due ? stats.oldestDueAgeSeconds : null)),
    h('dt', {}, 'Failed (24 h)'),
    h('dd', { 'data-field': 'failed' }, link(failedCount, `${at(project)}/events?state=failed`)),
    h('dt', {}, 'Last progress'),
    h('dd', {}, when(stats.lastProgressAt)),
    h('dt', {}, 'Paused targets'),
    h('dd', { 'data-field': 'paused' }, paused.length ? '' : 'none', ...paused.map(pausedLine)),
  )
}

function newCard(project: string): Card {
  const body = h('div')
  const chartBox = h('div', { class: 'trends' })
  const el = h(
    'section',
    { class: 'card', 'aria-label': project, 'data-project': project },
    h('h2', {}, link(project, `${at(project)}/targets`)),
    body,
    chartBox,
    h(
      'p',
      {},
      link('Targets', `${at(project)}/targets`),
      ' · ',
      link('Events', `${at(project)}/events`),
      ' · ',
      link('Schema', `${at(project)}/schema`),
    ),
  )
  return { el, body, charts: trendCharts(chartBox) }
}

async function fill(project: string, card: Card): Promise<void> {
  const p = projectPath(project)
  try {
    const [stats, targets, trends] = await Promise.all([
      api<Stats>('GET', `${p}/stats`),
      api<{ targets: TargetJson[] }>('GET', `${p}/targets`).catch(() => ({ targets: [] })),
      api<Trends>('GET', `${p}/trends?series=project`),
    ])
    replace(card.body, figures(project, stats, targets.targets))
    card.charts.update(trends, [trends.project])
  } catch (e) {
    replace(card.body, h('p', { class: 'error' }, errorText(e)))
  }
}

const pausedLine = (t: TargetJson) => h('div', { class: 'paused' }, h('strong', {}, t.target), `: paused, ${t.pause?.label ?? '?'}`)

/** Draws the Projects page and keeps it fresh. */
export async function projectsPage(ctx: PageContext): Promise<void> {
  const list = h('div', { class: 'cards' })
  const stamp = h('p', { class: 'status' })
  show(ctx.root, 'Projects', stamp, list)
  const cards = new Map<string, Card>()
  ctx.onLeave(() => {
    for (const c of cards.values()) c.charts.destroy()
  })
  const draw = async () => {
    try {
      const { projects } = await api<{ projects: string[] }>('GET', '/v1/projects')
      for (const [name, c] of cards)
        if (!projects.includes(name)) {
          c.charts.destroy()
          c.el.remove()
          cards.delete(name)
        }
      const shown = projects.map(name => {
        let c = cards.get(name)
        if (!c) cards.set(name, (c = newCard(name)))
        return c
      })
      // Appending an element already in place moves nothing; a new one lands in its sorted place.
      if (shown.length === 0) replace(list, 'No project has a schema yet.')
      else if (list.firstChild && !(list.firstChild instanceof HTMLElement)) replace(list)
      shown.forEach((c, i) => {
        if (list.children[i] !== c.el) list.insertBefore(c.el, list.children[i] ?? null)
      })
      await Promise.all(shown.map((c, i) => fill(projects[i] ?? '', c)))
      stamp.textContent = `Updated ${utc(new Date().toISOString())}; refreshes every ${REFRESH_MS / 1000} s.`
    } catch (e) {
      stamp.textContent = errorText(e)
    }
  }
  await draw()
  ctx.every(REFRESH_MS, () => keepingFocus(ctx.root, draw))
}
