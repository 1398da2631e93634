// Targets of a project: state in words (running; paused: down / needs operator, since, next probe),
// the backlog, the failure run; pause and resume behind a confirmation, for roles that may.
import { api, projectPath, type TargetJson } from './api.js'
import { age, h, stateBadge, table, when } from './dom.js'
import { at, confirmed, failed, keepingFocus, link, show, type PageContext } from './page.js'

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
    `since ${when(t.pause.since)}`,
    t.pause.probeAt ? `, next probe ${when(t.pause.probeAt)}` : '',
  )
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
    h('td', {}, t.due),
    h('td', {}, age(t.due ? t.oldestDueAgeSeconds : null)),
    h(
      'td',
      { class: 'hide-narrow' },
      t.consecutiveFailures ? `${t.consecutiveFailures} failed in a row since ${when(t.failingSince)}` : 'last batch ok',
    ),
    h('td', {}, ctx.can.admin ? (t.state === 'paused' ? act('resume') : act('pause')) : ''),
  )
}

/** Draws the Targets page of ctx.project, refreshed every few seconds. */
export async function targetsPage(ctx: PageContext): Promise<void> {
  const title = `Targets of ${ctx.project}`
  const draw = async () => {
    try {
      const { targets } = await api<{ targets: TargetJson[] }>('GET', `${projectPath(ctx.project)}/targets`)
      const head: Array<string | [string, string]> = ['Target', 'State', 'Due', 'Oldest due', ['Recent', 'hide-narrow'], '']
      show(
        ctx.root,
        title,
        table(
          head,
          targets.map(t => row(ctx, t, draw)),
        ),
      )
    } catch (e) {
      failed(ctx.root, title, e)
    }
  }
  await draw()
  ctx.every(REFRESH_MS, () => keepingFocus(ctx.root, draw))
}
