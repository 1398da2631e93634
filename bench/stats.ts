/** The p-quantile (0..1) of ascending `sorted` values, nearest-rank; NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))
  return sorted[rank] ?? NaN
}

/** Median, min and max of a sample (the middle of an even sample is the mean of its two middles). */
export function summary(values: readonly number[]): { median: number; min: number; max: number } {
  const s = [...values].sort((a, b) => a - b)
  if (s.length === 0) return { median: NaN, min: NaN, max: NaN }
  const mid = Math.floor(s.length / 2)
  const median = s.length % 2 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2
  return { median, min: s[0] ?? NaN, max: s[s.length - 1] ?? NaN }
}

/** A plain-text table: a header row, a rule, then rows; numeric-looking cells are right-aligned. */
export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map(r => (r[i] ?? '').length)))
  const numeric = (s: string) => /^[-+]?[\d,.]+(%|x| ms)?$/.test(s)
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (numeric(c) ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd()
  return [line(header), widths.map(w => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}

/** Whole numbers with thousands separators; a dash for a missing value. */
export function int(n: number | undefined): string {
  return n === undefined || !Number.isFinite(n) ? '-' : Math.round(n).toLocaleString('en-US')
}

/** A number with `digits` decimals; a dash for a missing value. */
export function dec(n: number | undefined, digits = 2): string {
  return n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(digits)
}
