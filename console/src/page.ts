// What every page gets, and the few helpers they share: a status line, confirmed writes, links.
import { ApiError, type Can } from './api.js'
import { h, refreshAges, replace } from './dom.js'

/** A page's inputs: where to draw, what the caller may do, the route's project and query. */
export type PageContext = {
  root: HTMLElement
  can: Can
  project: string
  query: URLSearchParams
  /** Registers a timer the router clears when the page is left. */
  every(ms: number, fn: () => Promise<void>): void
  /** Registers what the router runs when the page is left (charts free their listeners). */
  onLeave(fn: () => void): void
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

/** True while the user has text selected inside `root` (a refresh then waits: redrawing would drop it). */
export function selecting(root: HTMLElement): boolean {
  const sel = document.getSelection()
  if (!sel || sel.isCollapsed || sel.rangeCount === 0) return false
  return root.contains(sel.getRangeAt(0).commonAncestorContainer)
}

const PAUSED = 'Refresh paused while text is selected; clear the selection to resume.'
let paused = false

/** The boxes that scroll on their own (payloads, responses, wide tables), by position. */
const scrollers = (root: HTMLElement) => [...root.querySelectorAll<HTMLElement>('pre, .table-wrap')]

/**
 * Runs a periodic redraw without losing the user's place. While text is selected on the page it
 * does not run at all (the status line says so); otherwise the focused control is focused again and
 * every scrolling box keeps its offset. A page's `redraw` itself leaves the page alone when its data
 * did not change ({@link unchanged}), so most refreshes touch nothing but the ages.
 */
export async function keepingFocus(root: HTMLElement, redraw: () => Promise<void>): Promise<void> {
  if (selecting(root)) {
    paused = true
    return say(PAUSED)
  }
  if (paused) {
    paused = false
    if (document.getElementById('status')?.textContent === PAUSED) say('')
  }
  const active = document.activeElement
  const before = active && active !== root && root.contains(active) ? identity(active) : undefined
  const offsets = scrollers(root).map(el => [el.scrollTop, el.scrollLeft] as const)
  await redraw()
  refreshAges(root)
  scrollers(root).forEach((el, i) => {
    const [top, left] = offsets[i] ?? [0, 0]
    if (el.scrollTop !== top) el.scrollTop = top
    if (el.scrollLeft !== left) el.scrollLeft = left
  })
  if (before === undefined) return
  for (const el of root.querySelectorAll<HTMLElement>('a, button, input, select')) if (identity(el) === before) return el.focus()
}

/**
 * A page's memory of what it last drew: true when `data` is what the last draw showed, so the
 * refresh can leave the page as it is (selection, scroll, open details and all).
 */
export function unchanged(): (data: unknown) => boolean {
  let last: string | undefined
  return data => {
    const text = JSON.stringify(data)
    if (text === last) return true
    last = text
    return false
  }
}
