import { describe, expect, it } from 'vitest'
import { benchOptions } from '../../bench/options.js'

describe('benchOptions', () => {
  it("offers the bench's three latency rates by default, and BENCH_LATENCY_RATES replaces them", () => {
    expect(benchOptions([], {}).latencyRates).toEqual([500, 2_000, 5_000])
    expect(benchOptions(['--quick'], {}).latencyRates).toEqual([500, 2_000, 5_000])
    expect(benchOptions([], { BENCH_LATENCY_RATES: '500, 5000' }).latencyRates).toEqual([500, 5_000])
    expect(() => benchOptions([], { BENCH_LATENCY_RATES: '500,fast' })).toThrow('BENCH_LATENCY_RATES must be a positive integer')
  })

  it('lets flags win over variables and selects rows by key', () => {
    const opts = benchOptions(['--n', '500', '--only', 'actions-b1, actions-b1-handler'], { BENCH_N: '9000', BENCH_ONLY: 'bare' })
    expect(opts.n).toBe(500)
    expect([...(opts.only ?? [])]).toEqual(['actions-b1', 'actions-b1-handler'])
    expect(() => benchOptions(['--fast'], {})).toThrow(/usage: npm run bench/)
  })
})
