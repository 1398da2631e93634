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
    // 47 + 20 = 67 µs = 0.67x the cheapest peer; 12,000/s = 1.2x and 30,000/s = 3x the fastest.
    rows.set(`actions-b1${suffix}`, {
      key: `actions-b1${suffix}`,
      name: 'b1',
      eventsPerSecond: 12_000,
      ownUs: 47,
      pgUs: 20,
      statementsPerEvent: 0.1,
    })
    rows.set(`actions-b50${suffix}`, {
      key: `actions-b50${suffix}`,
      name: 'b50',
      eventsPerSecond: 30_000,
      ownUs: 10,
      pgUs: 12,
      statementsPerEvent: 0.01,
    })
    for (const [rate, p99Ms] of [
      [500, 99.9],
      [2_000, 99.9],
      [5_000, 249.9],
    ] as const) {
      rows.set(`latency-${rate}${suffix}`, { key: `latency-${rate}${suffix}`, name: `latency ${rate}`, eventsPerSecond: rate, p99Ms })
    }
  }
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

describe('the bench targets', () => {
  it('passes every target of both orderings at its bound', () => {
    const verdicts = evaluateTargets(atTheEdge(), PEERS)
    expect(verdicts.map(v => v.id).sort()).toEqual(IDS.flatMap(id => [`${id}/entity`, `${id}/none`]).sort())
    expect(verdicts.filter(v => v.ok !== true)).toEqual([])
  })

  it.each([
    ['b1-cpu', 'actions-b1', { ownUs: 47.1 }],
    ['b1-eps', 'actions-b1', { eventsPerSecond: 11_999 }],
    ['b50-eps', 'actions-b50', { eventsPerSecond: 29_999 }],
    ['b50-pg', 'actions-b50', { pgUs: 12.01 }],
    ['b1-stmts', 'actions-b1', { statementsPerEvent: 0.1001 }],
    ['b50-stmts', 'actions-b50', { statementsPerEvent: 0.0101 }],
    ['p99-500', 'latency-500', { p99Ms: 100 }],
    ['p99-2000', 'latency-2000', { p99Ms: 100 }],
    ['p99-5000', 'latency-5000', { p99Ms: 250 }],
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

  it('compares CPU with the cheapest peer and events/s with the fastest', () => {
    const verdicts = byId(evaluateTargets(atTheEdge(), PEERS))
    expect(verdicts.get('b1-cpu/entity')?.text).toContain("the best peer's (graphile-worker localQueue: 100.0 µs)")
    expect(verdicts.get('b1-eps/entity')?.text).toContain("the best peer's (pg-boss 2500, 10,000/s)")
    // Without the cheaper peer, the dearer one (120 µs) is the best: 67 / 120 passes with room.
    const one = byId(
      evaluateTargets(
        atTheEdge(rows => edit(rows, 'actions-b1', { ownUs: 60 })),
        PEERS.slice(0, 1),
      ),
    )
    expect(one.get('b1-cpu/entity')?.ok).toBe(true)
    expect(
      byId(
        evaluateTargets(
          atTheEdge(rows => edit(rows, 'actions-b1', { ownUs: 60 })),
          PEERS,
        ),
      ).get('b1-cpu/entity')?.ok,
    ).toBe(false)
  })

  it('says by how much a target is missed', () => {
    const verdicts = byId(
      evaluateTargets(
        atTheEdge(rows => edit(rows, 'actions-b1', { ownUs: 114, eventsPerSecond: 6_000 })),
        PEERS,
      ),
    )
    // 134 µs against 0.67 x 100: twice the bound.
    expect(verdicts.get('b1-cpu/entity')?.text).toContain('over by 2.00x (67.0 µs too many)')
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
    for (const id of ['b1-cpu/entity', 'b1-eps/none', 'b50-eps/entity']) expect(alone.get(id)?.ok).toBeUndefined()
    expect(alone.get('b50-pg/entity')?.ok).toBe(true)
  })

  it('prints one line per target and counts the outcomes', () => {
    const lines = targetLines(
      evaluateTargets(
        atTheEdge(rows => edit(rows, 'latency-2000-none', { p99Ms: 140 })),
        PEERS,
      ),
    )
    expect(lines[0]).toBe('Targets (computed from this run): 17 PASS, 1 FAIL, 0 not measured')
    expect(lines.filter(l => /^ {2}(PASS|FAIL|n\/a )/.test(l))).toHaveLength(18)
    expect(lines).toContain(
      '  FAIL  p99 enqueue-to-delivery at 2,000/s offered, ordering none: 140.0 ms (median of rounds); target < 100 ms; over by 40.0 ms',
    )
  })
})
