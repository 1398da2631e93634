import { Counter, Gauge, Registry } from 'prom-client'
import { PROJECT_LABEL } from './registry.js'

/** The Contember relay's metrics (lib/relay/), in a registry of its own: the relay serves it at /metrics or pushes it. */
export type RelayMetrics = ReturnType<typeof createRelayMetrics>

/** Builds the relay's registry. Each help text states its unit; the one label is the project. */
export function createRelayMetrics() {
  const registry = new Registry()
  const registers = [registry]
  const labelNames = [PROJECT_LABEL]
  const moved = new Counter({
    registers,
    labelNames,
    name: 'contember_actions_relay_events_moved_total',
    help: "Total number of rows the relay moved from a Contember engine's outbox into Actions (events), by contember_project.",
  })
  const refused = new Gauge({
    registers,
    labelNames,
    name: 'contember_actions_relay_refused_rows',
    help: "Number of rows the relay last found it cannot take and left in the engine's outbox (rows; reasons: `actions relay refused`), by contember_project.",
  })
  const failedPasses = new Counter({
    registers,
    labelNames,
    name: 'contember_actions_relay_passes_failed_total',
    help: 'Total number of relay passes over a project that ended on an error (passes; the relay tries again after its poll interval), by contember_project.',
  })
  return {
    registry,
    forProject: (project: string) => {
      const labels = { [PROJECT_LABEL]: project }
      return {
        moved: (n: number) => {
          if (n > 0) moved.inc(labels, n)
        },
        refused: (n: number) => refused.set(labels, n),
        failedPass: () => failedPasses.inc(labels, 1),
      }
    },
  }
}
