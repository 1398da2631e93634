// What every page gets, and the few helpers they share: a status line, confirmed writes, links.
import { ApiError, type Can } from './api.js'
import { h, replace } from './dom.js'

/** A page's inputs: where to draw, what the caller may do, the route's project and query. */
export type PageContext = {
  root: HTMLElement
  can: Can
  project: string
  query: URLSearchParams
  /** Registers a timer the router clears when the page is left. */
  every(ms: number, fn: () => Promise<void>): void
}

/** Says something in the status line (read out by screen readers). */
export function say(text: string): void {
  const el = document.getElementById('status')
  if (el) el.textContent = text
}

/** An error as a line of text for the page. */
export const errorText = (e: unknown): string => (e instanceof ApiError ? e.message : 'The request failed.')

/** A link to a console route; the project is escaped into the hash. */
export const link = (text: string, route: string): HTMLAnchorElement => h('a', { href: `#${route}` }, text)
/** The route prefix of a project. */
export const at = (project: string): string => `/p/${encodeURIComponent(project)}`

/** A button that asks before it runs `act`, then reports its outcome in the status line. */
export function confirmed(label: string, question: () => Promise<string> | string, act: () => Promise<string>, danger = false) {
  const button = h('button', { type: 'button', class: danger ? 'danger' : undefined }, label)
  button.addEventListener('click', async () => {
    button.disabled = true
    try {
      if (window.confirm(await question())) say(await act())
    } catch (e) {
      say(errorText(e))
    } finally {
      button.disabled = false
    }
  })
  return button
}

/** Draws a page's heading and body, or its error. */
export function show(root: HTMLElement, title: string, ...body: Array<Node | string>): void {
  replace(root, h('h1', {}, title), ...body)
}

/** Shows an error in place of the page. */
export function failed(root: HTMLElement, title: string, e: unknown): void {
  show(root, title, h('p', { class: 'error', role: 'alert' }, errorText(e)))
}

/** An element's identity across a redraw: its tag, link target, text and the row or card it sits in. */
function identity(el: Element): string {
  const holder = el.closest('[data-project],[data-target],[data-event]')
  const key = holder ? (holder.getAttribute('data-project') ?? holder.getAttribute('data-target') ?? holder.getAttribute('data-event')) : ''
  return `${el.tagName}|${el.getAttribute('href') ?? ''}|${el.textContent ?? ''}|${key ?? ''}`
}

/** Runs a periodic redraw without losing the keyboard user's place: the focused control is focused again after it. */
export async function keepingFocus(root: HTMLElement, redraw: () => Promise<void>): Promise<void> {
  const active = document.activeElement
  const before = active && active !== root && root.contains(active) ? identity(active) : undefined
  await redraw()
  if (before === undefined) return
  for (const el of root.querySelectorAll<HTMLElement>('a, button, input, select')) if (identity(el) === before) return el.focus()
}
