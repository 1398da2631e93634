import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, it, expect } from 'vitest'
import { createMetrics, createSweeperGauges } from '../../lib/metrics/registry.js'
import { promtoolBinary, pushgatewayBinary, requireBinary, scrape, startPushgateway } from '../helpers/pushgateway.js'

const monitoringDir = fileURLToPath(new URL('../../infra/monitoring/', import.meta.url))
const dashboardPath = join(monitoringDir, 'grafana/dashboards/actions.json')
const alertsPath = join(monitoringDir, 'alerts.yml')
const promtool = promtoolBinary()
const pushgateway = pushgatewayBinary()

interface Target {
  expr?: unknown
  refId?: unknown
}
interface Panel {
  id?: unknown
  type?: unknown
  title?: unknown
  targets?: Target[]
  panels?: Panel[]
}
interface Variable {
  name?: unknown
  definition?: unknown
}
interface Dashboard {
  uid?: unknown
  schemaVersion?: unknown
  panels?: Panel[]
  templating?: { list?: Variable[] }
}

async function run(cmd: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise(resolve => {
    execFile(cmd, args, { cwd: monitoringDir }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0
      resolve({ code, output: `$ ${cmd} ${args.join(' ')}\n${stdout}${stderr}` })
    })
  })
}

async function loadDashboard(): Promise<Dashboard> {
  return JSON.parse(await readFile(dashboardPath, 'utf8'))
}

// Collapsed rows nest their panels; rows themselves carry no queries.
function allPanels(panels: Panel[] = []): Panel[] {
  return panels.flatMap(p => [p, ...allPanels(p.panels)])
}

function dashboardExprs(dashboard: Dashboard): { where: string; expr: string }[] {
  return allPanels(dashboard.panels).flatMap(p =>
    (p.targets ?? []).map(t => ({
      where: `panel ${String(p.id)} "${String(p.title)}" target ${String(t.refId)}`,
      expr: typeof t.expr === 'string' ? t.expr : '',
    })),
  )
}

/** What Grafana would send for "All" projects and a 5m window, so promtool can parse it. */
function concrete(expr: string): string {
  return expr.replace(/\$\{?project(?::\w+)?\}?/g, '.*').replace(/\$\{?__\w+\}?/g, '5m')
}

/** The `expr:` values of alerts.yml, block scalars included (enough YAML for a file we control). */
function alertExprs(yaml: string): string[] {
  const lines = yaml.split('\n')
  const exprs: string[] = []
  lines.forEach((line, i) => {
    const m = /^(\s*)expr:\s*(.*)$/.exec(line)
    if (!m) return
    const [, indent = '', value = ''] = m
    if (!/^[|>][-+]?$/.test(value)) return void exprs.push(value)
    const block: string[] = []
    for (const next of lines.slice(i + 1)) {
      if (next.trim() !== '' && next.length - next.trimStart().length <= indent.length) break
      block.push(next)
    }
    exprs.push(block.join('\n'))
  })
  return exprs
}

const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'offset',
  'bool',
  'inf',
  'nan',
])

/**
 * Metric names a PromQL expression selects: identifiers left once strings, label matchers,
 * grouping lists and ranges are removed, minus functions (followed by `(`) and keywords.
 */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
  const names = [...bare.matchAll(/(?<![\w:.])[a-zA-Z_:][\w:]*(?![\w:])(?!\s*\()/g)].map(m => m[0])
  return names.filter(n => !KEYWORDS.has(n.toLowerCase()))
}

/** Every series name our code exposes, as Prometheus sees it after the Pushgateway. */
async function knownMetricNames(): Promise<Set<string>> {
  const metrics = [...(await createMetrics().registry.getMetricsAsJSON()), ...(await createSweeperGauges().registry.getMetricsAsJSON())]
  const names = new Set(['push_time_seconds', 'push_failure_time_seconds'])
  for (const { name, type } of metrics) {
    names.add(name)
    if (String(type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix)
  }
  return names
}

describe('dashboard', () => {
  it('parses, has the expected uid and the project variable', async () => {
    const dashboard = await loadDashboard()
    expect(dashboard.uid).toBe('contember-actions')
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36)
    const project = dashboard.templating?.list?.find(v => v.name === 'project')
    expect(project?.definition).toBe('label_values(contember_actions_worker_heartbeat_timestamp_seconds, contember_project)')
  })

  it('gives every panel a query and unique ids', async () => {
    const dashboard = await loadDashboard()
    const panels = allPanels(dashboard.panels)
    expect(panels.length).toBeGreaterThan(0)
    const ids = panels.map(p => p.id)
    expect(new Set(ids).size, `duplicate panel ids: ${ids.join(', ')}`).toBe(ids.length)
    const variables = (dashboard.templating?.list ?? []).map(v => v.name)
    expect(new Set(variables).size).toBe(variables.length)
    for (const panel of panels.filter(p => p.type !== 'row')) {
      const targets = panel.targets ?? []
      expect(targets.length, `panel "${String(panel.title)}" has no targets`).toBeGreaterThan(0)
      const refIds = targets.map(t => t.refId)
      expect(new Set(refIds).size, `panel "${String(panel.title)}" repeats a refId`).toBe(refIds.length)
      for (const t of targets)
        expect(typeof t.expr === 'string' && t.expr.trim() !== '', `panel "${String(panel.title)}" has an empty expr`).toBe(true)
    }
  })

  it('uses no template variable the syntax check would not substitute', async () => {
    for (const { where, expr } of dashboardExprs(await loadDashboard())) {
      expect(concrete(expr), where).not.toContain('$')
    }
  })
})

describe('metric names', () => {
  it('are all ones lib/metrics/registry.ts defines (or the Pushgateway adds), in alerts and dashboard', async () => {
    const known = await knownMetricNames()
    const alerts = alertExprs(await readFile(alertsPath, 'utf8'))
    const alertCount = (await readFile(alertsPath, 'utf8')).match(/^\s*- alert:/gm)?.length ?? 0
    expect(alerts.length, 'one expr per alert').toBe(alertCount)
    const sources = [
      ...alerts.map((expr, i) => ({ where: `alerts.yml expr #${i + 1}`, expr })),
      ...dashboardExprs(await loadDashboard()).map(({ where, expr }) => ({ where, expr: concrete(expr) })),
    ]
    const unknown = sources.flatMap(({ where, expr }) =>
      metricNames(expr)
        .filter(n => !known.has(n))
        .map(n => `${where}: ${n}`),
    )
    expect(unknown).toEqual([])
    // Guard the extractor itself: it must find the names it is meant to check.
    expect(metricNames(sources[0]?.expr ?? '')).toContain('contember_actions_worker_heartbeat_timestamp_seconds')
  })

  it('extractor ignores functions, keywords, labels, strings and ranges', () => {
    expect(metricNames('sum by (le, p) (rate(a_bucket{job="x_total"}[5m])) > 0 or absent(b offset 10m) and on (x) time() - c')).toEqual([
      'a_bucket',
      'b',
      'c',
    ])
  })
})

describe('alert annotations', () => {
  it('give each alert a severity, summary and description, no URLs, and name the project when grouped by it', async () => {
    const blocks = (await readFile(alertsPath, 'utf8')).split(/^\s*- alert:/m).slice(1)
    expect(blocks.length).toBeGreaterThan(0)
    for (const block of blocks) {
      const name = block.trim().split(/\s/)[0]
      expect(block, `${name} severity`).toMatch(/^\s*severity: (critical|warning|info)\s*$/m)
      expect(block, `${name} summary`).toMatch(/^\s*summary: /m)
      expect(block, `${name} description`).toMatch(/^\s*description: /m)
      expect(block, `${name} must not carry URLs`).not.toMatch(/https?:\/\//)
      if (/by \(contember_project\)/.test(block)) expect(block, `${name} names the project`).toContain('{{ $labels.contember_project }}')
    }
  })
})

describe.skipIf(!requireBinary('promtool', promtool))('promtool', () => {
  const check = async (...args: string[]) => {
    const result = await run(promtool ?? 'promtool', args)
    expect(result.code, result.output).toBe(0)
  }

  it('accepts prometheus.yml', () => check('check', 'config', 'prometheus.yml'))
  it('accepts alerts.yml', () => check('check', 'rules', 'alerts.yml'))
  it('passes the alert unit tests in alerts.test.yml', () => check('test', 'rules', 'alerts.test.yml'))

  it('parses every dashboard query', async () => {
    const targets = dashboardExprs(await loadDashboard())
    // promtool has no bare "check this PromQL" command; recording rules get the same parser.
    const rules = targets.map(({ expr }, i) => ({ record: `dashboard:query_${i}`, expr: concrete(expr) }))
    const dir = await mkdtemp(join(tmpdir(), 'actions-dashboard-rules-'))
    try {
      const file = join(dir, 'dashboard-rules.yml')
      // JSON is YAML, so no YAML library is needed.
      await writeFile(file, JSON.stringify({ groups: [{ name: 'dashboard', rules }] }, null, 2))
      const result = await run(promtool ?? 'promtool', ['check', 'rules', file])
      const legend = targets.map(({ where }, i) => `dashboard:query_${i} = ${where}`).join('\n')
      expect(result.code, `${result.output}\n${legend}`).toBe(0)
      expect(result.output).toContain(`${rules.length} rules found`)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe.skipIf(!requireBinary('prometheus-pushgateway', pushgateway))('Pushgateway helper', () => {
  it('starts a real Pushgateway that accepts a push and exposes it, and stops it', async () => {
    const gateway = await startPushgateway()
    try {
      const res = await fetch(`${gateway.url}/metrics/job/x/instance/y`, {
        method: 'PUT',
        headers: { 'Content-Type': 'text/plain; version=0.0.4' },
        body: '# TYPE probe_total counter\nprobe_total{contember_project="blog"} 3\n',
      })
      expect(res.ok, await res.text()).toBe(true)
      const text = await scrape(gateway.url)
      expect(text).toMatch(/^probe_total\{contember_project="blog",instance="y",job="x"\} 3$/m)
      expect(text).toMatch(/^push_time_seconds\{instance="y",job="x"\} \S+$/m)
    } finally {
      await gateway.stop()
    }
    await expect(fetch(`${gateway.url}/-/ready`)).rejects.toThrow()
  })
})
