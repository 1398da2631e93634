// Projects: each project the caller may see, with its backlog, recent failures, paused targets and
// dispatch heartbeat, refreshed every few seconds without a reload.
import { api, projectPath, type Stats, type TargetJson } from './api.js'
import { age, h, replace, when } from './dom.js'
import { at, errorText, keepingFocus, link, show, type PageContext } from './page.js'

/** How often the page refreshes: an operator watching a backlog drain sees it move. */
const REFRESH_MS = 5000

async function card(project: string): Promise<HTMLElement> {
  const p = projectPath(project)
  const [stats, targets] = await Promise.all([
    api<Stats>('GET', `${p}/stats`),
    api<{ targets: TargetJson[] }>('GET', `${p}/targets`).catch(() => ({ targets: [] })),
  ])
  const paused = targets.targets.filter(t => t.state === 'paused')
  // The API counts them (the failed index over 24 h, capped): "10000+" past the cap.
  const failedCount = `${stats.failedLast24h}${stats.failedLast24hCapped ? '+' : ''}`
  return h(
    'section',
    { class: 'card', 'aria-label': project, 'data-project': project },
    h('h2', {}, link(project, `${at(project)}/targets`)),
    h(
      'dl',
      {},
      h('dt', {}, 'Due'),
      h('dd', { 'data-field': 'due' }, stats.due),
      h('dt', {}, 'Oldest due'),
      h('dd', {}, age(stats.due ? stats.oldestDueAgeSeconds : null)),
      h('dt', {}, 'Failed (24 h)'),
      h('dd', { 'data-field': 'failed' }, link(failedCount, `${at(project)}/events?state=failed`)),
      h('dt', {}, 'Last progress'),
      h('dd', {}, stats.lastProgressAt ? `${when(stats.lastProgressAt)} (${age(stats.lastProgressAgeSeconds)} ago)` : '—'),
      h('dt', {}, 'Paused targets'),
      h('dd', { 'data-field': 'paused' }, paused.length ? '' : 'none', ...paused.map(pausedLine)),
    ),
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
}

const pausedLine = (t: TargetJson) => h('div', { class: 'paused' }, h('strong', {}, t.target), `: paused, ${t.pause?.label ?? '?'}`)

/** Draws the Projects page and keeps it fresh. */
export async function projectsPage(ctx: PageContext): Promise<void> {
  const list = h('div', { class: 'cards' })
  const stamp = h('p', { class: 'status' })
  show(ctx.root, 'Projects', stamp, list)
  const draw = async () => {
    try {
      const { projects } = await api<{ projects: string[] }>('GET', '/v1/projects')
      const cards = await Promise.all(projects.map(p => card(p).catch(e => h('section', { class: 'card error' }, `${p}: ${errorText(e)}`))))
      replace(list, ...(cards.length ? cards : ['No project has a schema yet.']))
      stamp.textContent = `Updated ${new Date().toLocaleTimeString()}; refreshes every ${REFRESH_MS / 1000} s.`
    } catch (e) {
      stamp.textContent = errorText(e)
    }
  }
  await draw()
  ctx.every(REFRESH_MS, () => keepingFocus(ctx.root, draw))
}
