// Trend charts of the last 24 h (GET …/trends), drawn with uPlot: bundled into the console's own
// app.js and style sheet by console/build.ts, so no script or style comes from another origin and the
// CSP stays as strict (uPlot sizes its boxes through element.style, which a CSP does not govern). One
// chart per series holds the counts per minute (deliveries, failed attempts, events failed), one the
// request duration (p50, p99); each comes with a line of text saying the same, so nothing depends on
// seeing the canvas. Charts are made once and fed new data in place: a refresh never rebuilds them.
import uPlot from 'uplot'
import type { TrendPoint, Trends, TrendSeries } from './api.js'
import { h, replace, utc } from './dom.js'

/** Colours of the series; the legend names them, the colour only repeats it. */
export const COLOURS = { delivered: '#1a7f37', failedAttempts: '#b3261e', eventsFailed: '#9a6700', p50: '#0b5cad', p99: '#8250df' }

/** Widest a chart is drawn; a narrow screen gets its box's width. */
const MAX_WIDTH = 560
const HEIGHT = 150

type Columns = {
  x: number[]
  delivered: number[]
  failed: number[]
  eventsFailed: number[]
  p50: (number | null)[]
  p99: (number | null)[]
}

/** The series as one value per minute of the window: counts 0 and durations missing where no request was made. */
export function columns(trends: Pick<Trends, 'from' | 'minutes'>, series: TrendSeries): Columns {
  const start = Date.parse(trends.from) / 1000
  const at = new Map<number, TrendPoint>(series.points.map(p => [Date.parse(p.minute) / 1000, p]))
  const c: Columns = { x: [], delivered: [], failed: [], eventsFailed: [], p50: [], p99: [] }
  for (let i = 0; i < trends.minutes; i++) {
    const x = start + i * 60
    const p = at.get(x)
    c.x.push(x)
    c.delivered.push(p?.delivered ?? 0)
    c.failed.push(p?.failedAttempts ?? 0)
    c.eventsFailed.push(p?.eventsFailed ?? 0)
    c.p50.push(p?.p50Ms ?? null)
    c.p99.push(p?.p99Ms ?? null)
  }
  return c
}

/**
 * The series in words: totals of the day, and where failures began (the first minute with a failed
 * attempt after the last minute without one, when the latest minutes fail).
 */
export function summary(series: TrendSeries): string {
  const sum = (k: 'delivered' | 'failedAttempts' | 'eventsFailed') => series.points.reduce((n, p) => n + p[k], 0)
  if (series.points.length === 0) return 'No request in the last 24 h.'
  const text = `Last 24 h: ${sum('delivered')} delivered, ${sum('failedAttempts')} failed attempts, ${sum('eventsFailed')} events failed.`
  let onset: TrendPoint | undefined
  for (const p of [...series.points].reverse()) {
    if (p.failedAttempts === 0) break
    onset = p
  }
  const p99 = series.points.at(-1)?.p99Ms
  return `${text}${onset ? ` Failing since ${utc(onset.minute)}.` : ''}${p99 == null ? '' : ` Latest p99 ${p99} ms.`}`
}

const tzDate = (ts: number) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC')

function countsOptions(title: string, width: number): uPlot.Options {
  return {
    title,
    width,
    height: HEIGHT,
    tzDate,
    scales: { x: { time: true } },
    series: [
      {},
      { label: 'delivered', stroke: COLOURS.delivered, width: 1.5 },
      { label: 'failed attempts', stroke: COLOURS.failedAttempts, width: 1.5 },
      { label: 'events failed', stroke: COLOURS.eventsFailed, width: 1.5, dash: [4, 3] },
    ],
    axes: [{}, { size: 50 }],
  }
}

function durationOptions(title: string, width: number): uPlot.Options {
  return {
    title,
    width,
    height: HEIGHT,
    tzDate,
    scales: { x: { time: true } },
    series: [
      {},
      { label: 'p50 ms', stroke: COLOURS.p50, width: 1.5, spanGaps: false },
      { label: 'p99 ms', stroke: COLOURS.p99, width: 1.5, spanGaps: false },
    ],
    axes: [{}, { size: 50 }],
  }
}

type Drawn = { box: HTMLElement; counts: uPlot; durations: uPlot; text: HTMLElement }

/**
 * A place for trend charts: `update` draws each series given (creating its charts the first time,
 * feeding them new data after) and removes those no longer given; `destroy` frees them all.
 */
export function trendCharts(container: HTMLElement): { update(trends: Trends, series: TrendSeries[]): void; destroy(): void } {
  const drawn = new Map<string, Drawn>()
  const width = () => Math.max(240, Math.min(MAX_WIDTH, (container.clientWidth || MAX_WIDTH) - 8))
  return {
    update(trends, series) {
      const keep = new Set<string>()
      for (const s of series) {
        const key = s.target ?? ''
        keep.add(key)
        const c = columns(trends, s)
        const name = s.target ?? 'all targets'
        let d = drawn.get(key)
        if (!d) {
          const box = h('figure', { class: 'trend', 'data-trend': key })
          const text = h('figcaption', { class: 'trend-summary' })
          container.appendChild(box)
          const counts = new uPlot(countsOptions(`${name}: per minute`, width()), [c.x, c.delivered, c.failed, c.eventsFailed], box)
          const durations = new uPlot(durationOptions(`${name}: request duration`, width()), [c.x, c.p50, c.p99], box)
          box.appendChild(text)
          d = { box, counts, durations, text }
          drawn.set(key, d)
        } else {
          d.counts.setData([c.x, c.delivered, c.failed, c.eventsFailed])
          d.durations.setData([c.x, c.p50, c.p99])
        }
        const words = summary(s)
        if (d.text.textContent !== words) d.text.textContent = words
      }
      for (const [key, d] of drawn)
        if (!keep.has(key)) {
          d.counts.destroy()
          d.durations.destroy()
          d.box.remove()
          drawn.delete(key)
        }
    },
    destroy() {
      for (const d of drawn.values()) {
        d.counts.destroy()
        d.durations.destroy()
      }
      drawn.clear()
      replace(container)
    },
  }
}
