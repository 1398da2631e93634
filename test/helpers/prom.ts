/** One sample of the Prometheus text format. */
export type Sample = { name: string; labels: Record<string, string>; value: number }

/** Parses the Prometheus text exposition format (what the Pushgateway's /metrics serves). */
export function parseSamples(text: string): Sample[] {
  const out: Sample[] = []
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line)
    if (!m) continue
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1] ?? ''] = (l[2] ?? '').replace(/\\(.)/g, '$1')
    out.push({ name: m[1] ?? '', labels, value: Number(m[3]) })
  }
  return out
}

/** Sums a metric's samples per project across every instance (what `sum by (contember_project)` gives). */
export function sumByProject(samples: Sample[], name: string): Record<string, number> {
  const out: Record<string, number> = {}
  for (const s of samples) {
    if (s.name !== name) continue
    const p = s.labels.contember_project ?? ''
    out[p] = (out[p] ?? 0) + s.value
  }
  return out
}
