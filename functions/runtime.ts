// What the Lambda handlers share, one file per job under functions/runtime/: the cold start and its
// secret (cold-start.ts, ssm.ts, auth-failure.ts), the invocation's logger (invocation.ts), one middy
// middleware per job (flush-spans.ts, flush-metrics.ts, renew-secret.ts) and closing idle connections
// (idle-connections.ts). A handler registers the middlewares it needs, in the order renew, metrics,
// spans: middy runs `after` hooks last-registered first, so spans flush, then metrics (with the spans
// a collector lost), then a refused login renews the secret.
export { coldStartDeps, createColdStart, renewSecretsAfter, type ColdStart, type DepsSource } from './runtime/cold-start.js'
export { flushMetricsAfter } from './runtime/flush-metrics.js'
export { flushSpansAfter } from './runtime/flush-spans.js'
export { closeIdleConnections } from './runtime/idle-connections.js'
export { forInvocation } from './runtime/invocation.js'
export { renewSecretAfterRefusal } from './runtime/renew-secret.js'
export { SSM_CACHE_SECONDS, ssmParameterReader } from './runtime/ssm.js'
