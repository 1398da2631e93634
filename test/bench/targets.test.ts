import { describe, expect, it } from 'vitest'
import { evaluateTargets, targetLines, type RowFigures, type Verdict } from '../../bench/targets.js'

// bench/targets.ts turns one run's figures into the bench's PASS/FAIL lines. Each target is checked at
// its edge: the bound itself (a pass for <= and >=, a fail for <) and just past it.

// The cheapest peer per event (100 µs) is not the fastest (10,000/s): each target must pick its own best.
const PEERS: RowFigures[] = [
  { key: 'pgboss-2500', name: 'pg-boss 2500', eventsPerSecond: 10_000, ownUs: 80, pgUs: 40 },
  { key: 'graphile-2', name: 'graphile-worker localQueue', eventsPerSecond: 8_000, ownUs: 60, pgUs: 40 },
]

/** Rows that meet every target exactly at its bound, for both orderings; `change` edits some of them. */
function atTheEdge(change: (rows: Map<string, RowFigures>) => void = () => {}): Map<string, RowFigures> {
  const rows = new Map<string, RowFigures>()
  for (const suffix of ['', '-none']) {
    // 80 + 20 = 100 µs = 1x the cheapest peer; 10,000/s = 1x and 25,000/s = 2.5x the fastest; Postgres
    // at batchSize 50 20 µs = 0.5x the cheapest peer's 40; the capped row's 80 µs = 4x actions-b1's 20.
    rows.set(`actions-b1${suffix}`, {
      key: `actions-b1${suffix}`,
      name: 'b1',
      eventsPerSecond: 10_000,
      ownUs: 80,
      pgUs: 20,
      statementsPerEvent: 0.013,
    })
    rows.set(`actions-b50${suffix}`, {
      key: `actions-b50${suffix}`,
      name: 'b50',
      eventsPerSecond: 25_000,
      ownUs: 10,
      pgUs: 20,
      statementsPerEvent: 0.004,
    })
    for (const [rate, p99Ms] of [
      [500, 21.4],
      [2_000, 27.4],
      [5_000, 156.1],
    ] as const) {
      rows.set(`latency-${rate}${suffix}`, { key: `latency-${rate}${suffix}`, name: `latency ${rate}`, eventsPerSecond: rate, p99Ms })
    }
  }
  rows.set('actions-b1-capped', { key: 'actions-b1-capped', name: 'capped', eventsPerSecond: 500, ownUs: 300, pgUs: 80 })
  change(rows)
  return rows
}

const edit = (rows: Map<string, RowFigures>, key: string, figures: Partial<RowFigures>) => {
  const row = rows.get(key)
  if (!row) throw new Error(`no row ${key}`)
  rows.set(key, { ...row, ...figures })
}

const byId = (verdicts: Verdict[]) => new Map(verdicts.map(v => [v.id, v]))

const IDS = ['b1-cpu', 'b1-eps', 'b50-eps', 'b50-pg', 'b1-stmts', 'b50-stmts', 'p99-500', 'p99-2000', 'p99-5000']
/** Targets of one row only, not per ordering: the capped row runs with per-entity order. */
const ENTITY_ONLY = ['capped-pg/entity']

describe('the bench targets', () => {
  it('passes every target of both orderings at its bound', () => {
    const verdicts = evaluateTargets(atTheEdge(), PEERS)
    expect(verdicts.map(v => v.id).sort()).toEqual([...IDS.flatMap(id => [`${id}/entity`, `${id}/none`]), ...ENTITY_ONLY].sort())
    expect(verdicts.filter(v => v.ok !== true)).toEqual([])
  })

  it.each([
    ['b1-cpu', 'actions-b1', { ownUs: 80.1 }],
    ['b1-eps', 'actions-b1', { eventsPerSecond: 9_999 }],
    ['b50-eps', 'actions-b50', { eventsPerSecond: 24_999 }],
    ['b50-pg', 'actions-b50', { pgUs: 20.01 }],
    ['b1-stmts', 'actions-b1', { statementsPerEvent: 0.0131 }],
    ['b50-stmts', 'actions-b50', { statementsPerEvent: 0.0041 }],
    ['p99-500', 'latency-500', { p99Ms: 21.5 }],
    ['p99-2000', 'latency-2000', { p99Ms: 27.5 }],
    ['p99-5000', 'latency-5000', { p99Ms: 156.2 }],
  ] as const)('fails %s just past its bound, for that ordering only', (id, key, figures) => {
    for (const [ordering, suffix] of [
      ['entity', ''],
      ['none', '-none'],
    ] as const) {
      const verdicts = byId(
        evaluateTargets(
          atTheEdge(rows => edit(rows, `${key}${suffix}`, figures)),
          PEERS,
        ),
      )
      expect(verdicts.get(`${id}/${ordering}`)?.ok).toBe(false)
      // Everything else still passes: the miss is this target's and this ordering's.
      expect([...verdicts.values()].filter(v => v.ok !== true).map(v => v.id)).toEqual([`${id}/${ordering}`])
    }
  })

  it("fails the capped row just past 4x actions-b1's Postgres CPU per event", () => {
    const verdicts = byId(
      evaluateTargets(
        atTheEdge(rows => edit(rows, 'actions-b1-capped', { pgUs: 80.1 })),
        PEERS,
      ),
    )
    expect(verdicts.get('capped-pg/entity')?.ok).toBe(false)
    expect([...verdicts.values()].filter(v => v.ok !== true).map(v => v.id)).toEqual(['capped-pg/entity'])
    expect(verdicts.get('capped-pg/entity')?.text).toContain('80.1 µs per event = 4.00x actions-b1')
  })

  it('compares CPU with the cheapest peer and events/s with the fastest', () => {
    const verdicts = byId(evaluateTargets(atTheEdge(), PEERS))
    expect(verdicts.get('b1-cpu/entity')?.text).toContain("the best peer's (graphile-worker localQueue: 100.0 µs)")
    expect(verdicts.get('b1-eps/entity')?.text).toContain("the best peer's (pg-boss 2500, 10,000/s)")
    // Without the cheaper peer, the dearer one (120 µs) is the best: 110 / 120 passes, 110 / 100 does not.
    const one = byId(
      evaluateTargets(
        atTheEdge(rows => edit(rows, 'actions-b1', { ownUs: 90 })),
        PEERS.slice(0, 1),
      ),
    )
    expect(one.get('b1-cpu/entity')?.ok).toBe(true)
    expect(
      byId(
        evaluateTargets(
          atTheEdge(rows => edit(rows, 'actions-b1', { ownUs: 90 })),
          PEERS,
        ),
      ).get('b1-cpu/entity')?.ok,
    ).toBe(false)
  })

  it('says by how much a target is missed', () => {
    const verdicts = byId(
      evaluateTargets(
        atTheEdge(rows => edit(rows, 'actions-b1', { ownUs: 180, eventsPerSecond: 5_000 })),
        PEERS,
      ),
    )
    // 200 µs against 1 x 100: twice the bound.
    expect(verdicts.get('b1-cpu/entity')?.text).toContain('over by 2.00x (100.0 µs too many)')
    expect(verdicts.get('b1-eps/entity')?.text).toContain('short by 2.00x')
  })

  it('reports a target as not measured when its row or every peer is missing, never as a pass', () => {
    const rows = atTheEdge(r => {
      r.delete('actions-b50-none')
      r.delete('latency-5000')
    })
    const verdicts = byId(evaluateTargets(rows, PEERS))
    for (const id of ['b50-eps/none', 'b50-pg/none', 'b50-stmts/none', 'p99-5000/entity']) expect(verdicts.get(id)?.ok).toBeUndefined()
    expect(verdicts.get('b50-eps/entity')?.ok).toBe(true)
    const alone = byId(evaluateTargets(atTheEdge(), []))
    for (const id of ['b1-cpu/entity', 'b1-eps/none', 'b50-eps/entity', 'b50-pg/entity']) expect(alone.get(id)?.ok).toBeUndefined()
    expect(alone.get('capped-pg/entity')?.ok).toBe(true)
    const uncapped = byId(
      evaluateTargets(
        atTheEdge(r => r.delete('actions-b1-capped')),
        PEERS,
      ),
    )
    expect(uncapped.get('capped-pg/entity')?.ok).toBeUndefined()
  })

  it('prints one line per target and counts the outcomes', () => {
    const lines = targetLines(
      evaluateTargets(
        atTheEdge(rows => edit(rows, 'latency-2000-none', { p99Ms: 140 })),
        PEERS,
      ),
    )
    expect(lines[0]).toBe('Targets (computed from this run): 18 PASS, 1 FAIL, 0 not measured')
    expect(lines.filter(l => /^ {2}(PASS|FAIL|n\/a )/.test(l))).toHaveLength(19)
    expect(lines).toContain(
      '  FAIL  p99 enqueue-to-delivery at 2,000/s offered, ordering none: 140.0 ms (median of rounds); target <= 27.4 ms; over by 112.6 ms',
    )
  })
})
