// DOM building without HTML parsing: every text from the API goes in through text nodes, so a
// payload holding `<img onerror=…>` or `</script>` shows as the characters it is.
export type Child = Node | string | number | null | undefined | false
type Attrs = Record<string, string | boolean | ((e: Event) => void) | undefined>

/** An element with attributes (on… keys become listeners) and children (strings become text nodes). */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag)
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue
    if (typeof value === 'function') el.addEventListener(key.slice(2), value)
    else el.setAttribute(key, value === true ? '' : value)
  }
  append(el, children)
  return el
}

/** Appends children, strings as text. */
export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue
    el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c)
  }
}

/** Replaces an element's children. */
export function replace(el: Node, ...children: Child[]): void {
  while (el.firstChild) el.removeChild(el.firstChild)
  append(el, children)
}

/** A state as a labelled badge: the word is always there, the colour only repeats it. */
export function stateBadge(state: string): HTMLSpanElement {
  return h('span', { class: `state state-${state.replace(/[^a-z]/g, '')}` }, state)
}

/** Seconds as a short age: 42 s, 5 min, 3 h, 2 d. */
export function age(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return '—'
  if (seconds < 90) return `${Math.round(seconds)} s`
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`
  if (seconds < 172_800) return `${Math.round(seconds / 3600)} h`
  return `${Math.round(seconds / 86_400)} d`
}

/** An ISO time in UTC, to the second, with its zone said: `2026-12-04 01:37:56 UTC`. */
export function utc(iso: string): string {
  return `${new Date(iso).toISOString().slice(0, 19).replace('T', ' ')} UTC`
}

/** How long ago `iso` was, by this browser's clock: "3 min ago", "in 20 s" for a time ahead. */
export function ago(iso: string, now = Date.now()): string {
  const s = (now - new Date(iso).getTime()) / 1000
  return s >= 0 ? `${age(s)} ago` : `in ${age(-s)}`
}

/**
 * A time as UTC with its relative age, in a <time> element whose age {@link refreshAges} updates in
 * place (a page whose data did not change is not redrawn, so its ages must move on their own).
 */
export function when(iso: string | null | undefined): HTMLElement | string {
  if (!iso) return '—'
  return h('time', { datetime: iso, title: utc(iso) }, `${utc(iso)} (${ago(iso)})`)
}

/** Brings every age drawn by {@link when} under `root` up to now, touching nothing else. */
export function refreshAges(root: ParentNode): void {
  for (const t of root.querySelectorAll('time[datetime]')) {
    const iso = t.getAttribute('datetime') ?? ''
    const text = `${utc(iso)} (${ago(iso)})`
    if (t.textContent !== text) t.textContent = text
  }
}

/** A table inside a scrolling wrapper, so a narrow screen scrolls it instead of the page. */
export function table(head: Array<string | [string, string]>, rows: HTMLTableRowElement[]): HTMLDivElement {
  const ths = head.map(c => (typeof c === 'string' ? h('th', { scope: 'col' }, c) : h('th', { scope: 'col', class: c[1] }, c[0])))
  return h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, ...ths)), h('tbody', {}, ...rows)))
}
