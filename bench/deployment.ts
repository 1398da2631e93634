import { readFileSync } from 'node:fs'
import { repoFile } from './repo.js'

/** The dispatch event source as serverless.yml deploys it (its default params). */
export type EventSource = {
  /** maximumBatchingWindow, in ms: the event source gathers signals this long, or until a full batch. */
  batchingWindowMs: number
  /** batchSize: signals per invocation at most. */
  batchSize: number
  /** maximumConcurrency: invocations side by side at most. */
  maximumConcurrency: number
  /** dispatchTimeout, in ms. */
  timeoutMs: number
}

/**
 * Reads the event source's settings from serverless.yml's params, so the latency runs use what the
 * deployment uses rather than a copy that could drift. Only plain numeric `name: value` lines are read.
 */
export function deployedEventSource(file = repoFile('serverless.yml')): EventSource {
  const text = readFileSync(file, 'utf8')
  const param = (name: string): number => {
    const m = new RegExp(`^\\s+${name}:\\s*(\\d+)\\s*$`, 'm').exec(text)
    if (!m?.[1]) throw new Error(`serverless.yml has no numeric param ${name}`)
    return Number(m[1])
  }
  return {
    batchingWindowMs: param('maximumBatchingWindow') * 1000,
    batchSize: param('batchSize'),
    maximumConcurrency: param('maximumConcurrency'),
    timeoutMs: param('dispatchTimeout') * 1000,
  }
}
