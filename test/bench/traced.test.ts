import { SpanKind } from '@opentelemetry/api'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startCollectorProcess, type CollectorProcess } from '../../bench/collector.js'
import { report } from '../../bench/report.js'
import type { RunResult } from '../../bench/timed.js'
import { loadConfig } from '../../lib/config.js'
import { createLogger } from '../../lib/log.js'
import { createTracing } from '../../lib/tracing/tracing.js'

// The traced row's collector runs in its own process and counts what the engine's own exporter sends
// it; the report prints what the traced row adds per event against actions-b1 of the same run.

let collector: CollectorProcess

beforeAll(async () => {
  collector = await startCollectorProcess()
}, 30_000)

afterAll(async () => {
  await collector?.stop()
})

describe('bench collector', () => {
  it("counts the spans of the engine's OTLP/HTTP exports and clears them on reset", async () => {
    const config = loadConfig({
      DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres',
      SIGNAL_QUEUE_URL: 'http://127.0.0.1:1/queue',
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_TRACES_SAMPLER: 'always_on',
    })
    const tracing = createTracing(config)
    const log = createLogger('error')
    const dropped: number[] = []
    for (let i = 0; i < 7; i++) await tracing.span('webhook', { kind: SpanKind.CLIENT }, async () => i)
    await tracing.flush(log, n => dropped.push(n))
    const first = await collector.counts()
    expect(first.spans).toBe(7)
    expect(first.requests).toBeGreaterThan(0)
    expect(dropped).toEqual([])

    await collector.reset()
    await tracing.span('actions.enqueue', { kind: SpanKind.SERVER }, async () => undefined)
    await tracing.flush(log, n => dropped.push(n))
    expect((await collector.counts()).spans).toBe(1)
    await tracing.shutdown()
  })
})

const run = (benchMs: number, postgresMs: number, seconds: number, spans?: number): RunResult => ({
  events: 1_000,
  seconds,
  delivered: 1_000,
  duplicates: 0,
  allDelivered: true,
  cpu: { bench: 0, receiver: 0, producer: 0, postgres: 0, machine: 0, benchMs, postgresMs },
  ...(spans !== undefined ? { spans } : {}),
})

/** The report of a run holding actions-b1 (one round, `plain`) and the traced row (its rounds, `traced`). */
const tracedReport = (plain: RunResult, traced: RunResult[], tracedScenario = 'traced') =>
  report({
    scenarios: [
      { key: 'actions-b1', contender: 'Actions', scenario: 'drainProject, batchSize 1', kind: 'delivery' },
      { key: 'actions-b1-traced', contender: 'Actions', scenario: tracedScenario, kind: 'delivery' },
    ],
    results: new Map([
      ['actions-b1', [plain]],
      ['actions-b1-traced', traced],
    ]),
    header: [],
  })

describe('bench report, traced row', () => {
  it('prints what tracing adds per event against actions-b1 of the same run, with spans per event', () => {
    // Medians of rounds: the middle round by events/s stands for the CPU, the middle spans count for spans.
    const text = tracedReport(
      run(90, 70, 0.2),
      [run(200, 90, 0.4, 1_000), run(130, 75, 0.25, 1_020), run(400, 99, 0.5, 980)],
      'drainProject, batchSize 1, tracing on',
    )
    expect(text).toContain(
      'tracing on (always_on, OTLP/HTTP to a collector process): +110.0 µs dispatcher, +20.0 µs Postgres per event at batchSize 1',
    )
    expect(text).toContain('1.00 spans exported per event')
  })

  it('signs a difference that went the other way', () => {
    const text = tracedReport(run(90, 70, 0.2), [run(95, 61, 0.2, 1_000)])
    expect(text).toContain('+5.0 µs dispatcher, -9.0 µs Postgres per event')
  })

  it('prints no tracing line without actions-b1 in the run', () => {
    const text = report({
      scenarios: [{ key: 'actions-b1-traced', contender: 'Actions', scenario: 'traced', kind: 'delivery' }],
      results: new Map([['actions-b1-traced', [run(130, 75, 0.25, 1_000)]]]),
      header: [],
    })
    expect(text).not.toContain('tracing on (')
  })
})
