// The console's entry: the login form (the token kept in sessionStorage only), the caller's role,
// and a hash router over the pages. Nothing here parses HTML.
import { api, canOf, clearToken, setToken, token, whenUnauthorized, type Whoami } from './api.js'
import { h, replace } from './dom.js'
import { eventPage } from './event.js'
import { eventsPage } from './events.js'
import { at, errorText, failed, link, say, show, type PageContext } from './page.js'
import { projectsPage } from './projects.js'
import { schemaPage } from './schema.js'
import { targetsPage } from './targets.js'

const root = document.getElementById('app') as HTMLElement
let timers: number[] = []
let leaving: Array<() => void> = []
let me: Whoami | undefined

function login(message = ''): void {
  me = undefined
  replace(document.getElementById('nav') as HTMLElement)
  ;(document.getElementById('who') as HTMLElement).textContent = ''
  ;(document.getElementById('logout') as HTMLElement).hidden = true
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', required: true, id: 'token' })
  const form = h(
    'form',
    { class: 'login', 'aria-label': 'Log in' },
    h('label', { for: 'token' }, 'Admin API token (a project token, or the bootstrap token)', input),
    h('button', { type: 'submit' }, 'Log in'),
    message ? h('p', { class: 'error', role: 'alert' }, message) : '',
  )
  form.addEventListener('submit', e => {
    e.preventDefault()
    setToken(input.value.trim())
    void start()
  })
  show(root, 'Log in', form)
  input.focus()
}

function chrome(w: Whoami): void {
  const project = w.kind === 'token' ? w.project : /^#\/p\/([^/?]+)/.exec(location.hash)?.[1]
  const links = [link('Projects', '/projects')]
  if (project) {
    const name = decodeURIComponent(project)
    links.push(link('Targets', `${at(name)}/targets`), link('Events', `${at(name)}/events`), link('Schema', `${at(name)}/schema`))
  }
  replace(document.getElementById('nav') as HTMLElement, ...links)
  ;(document.getElementById('who') as HTMLElement).textContent = w.kind === 'system' ? 'system' : `${w.project} · ${w.role}`
  ;(document.getElementById('logout') as HTMLElement).hidden = false
}

async function route(): Promise<void> {
  for (const t of timers) clearInterval(t)
  timers = []
  for (const fn of leaving) fn()
  leaving = []
  if (!me) return
  chrome(me)
  const [path = '', search = ''] = location.hash.slice(1).split('?')
  const parts = path.split('/').slice(1).map(decodeURIComponent)
  // Each visit draws into a new box: a slow answer for the page just left lands in a detached one.
  const view = h('div')
  replace(root, view)
  const ctx: PageContext = {
    root: view,
    can: canOf(me),
    project: parts[1] ?? '',
    query: new URLSearchParams(search),
    every: (ms, fn) => void timers.push(window.setInterval(() => void fn(), ms)),
    onLeave: fn => void leaving.push(fn),
  }
  say('')
  if (parts[0] === 'p' && parts[2] === 'targets') return targetsPage(ctx)
  if (parts[0] === 'p' && parts[2] === 'events') return eventsPage(ctx)
  if (parts[0] === 'p' && parts[2] === 'event' && parts[3]) return eventPage(ctx, parts[3])
  if (parts[0] === 'p' && parts[2] === 'schema') return schemaPage(ctx)
  return projectsPage(ctx)
}

async function start(): Promise<void> {
  if (!token()) return login()
  try {
    me = await api<Whoami>('GET', '/v1/whoami')
  } catch (e) {
    clearToken()
    return login(errorText(e))
  }
  await route()
  root.focus()
}

whenUnauthorized(() => {
  clearToken()
  login('The token was refused (unknown or revoked).')
})
document.getElementById('logout')?.addEventListener('click', () => {
  clearToken()
  login()
})
window.addEventListener('hashchange', () => void route().catch(e => failed(root, 'Error', e)))
void start()
