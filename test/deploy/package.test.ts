import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { inflateRawSync } from 'node:zlib'
import { configSchema, loadConfig } from '../../lib/config.js'
import { EMF_METRICS } from '../../lib/metrics/emf-metrics.js'
import { findBinary } from '../helpers/pushgateway.js'
import { BEARER_ALIAS } from '../../functions/admin.js'

// Packages serverless.yml exactly as `npm run package` does and checks the CloudFormation template
// and the artifacts it produced: what would be deployed, without deploying it.

const run = promisify(execFile)
const repoRoot = fileURLToPath(new URL('../..', import.meta.url))
const FUNCTIONS = ['enqueue', 'dispatch', 'sweeper', 'admin', 'relay'] as const
const PACKAGE_TIMEOUT_MS = 180_000

type Fn = (typeof FUNCTIONS)[number]
type Ref = { Ref: string }
type GetAtt = { 'Fn::GetAtt': [string, string] }

/** The parts of resource properties this test reads; the template is JSON, so this is a reading aid, not a guarantee. */
interface Props {
  FunctionName?: unknown
  Handler?: string
  Runtime?: string
  Architectures?: string[]
  Timeout?: number
  Environment?: { Variables: Record<string, unknown> }
  Code?: { S3Key: string }
  VpcConfig?: unknown
  BatchSize?: number
  MaximumBatchingWindowInSeconds?: number
  FunctionResponseTypes?: string[]
  ScalingConfig?: { MaximumConcurrency?: number }
  EventSourceArn?: unknown
  VisibilityTimeout?: number
  MessageRetentionPeriod?: number
  RedrivePolicy?: { deadLetterTargetArn: unknown; maxReceiveCount: number }
  ScheduleExpression?: string
  State?: string
  Targets?: { Arn: unknown }[]
  Principal?: string
  AuthType?: string
  TargetFunctionArn?: unknown
  Qualifier?: string
  FunctionVersion?: string
  Name?: string
  InvokedViaFunctionUrl?: boolean
  FunctionUrlAuthType?: string
  Action?: string
  Namespace?: string
  MetricName?: string
  Dimensions?: { Name: string; Value: unknown }[]
  Threshold?: number
  ComparisonOperator?: string
  Policies?: { PolicyDocument: { Statement: Statement[] } }[]
  ManagedPolicyArns?: unknown[]
  ReservedConcurrentExecutions?: number
  MaximumEventAgeInSeconds?: number
  MaximumRetryAttempts?: number
  AlarmName?: string
  AlarmActions?: unknown
  OKActions?: unknown
  Metrics?: {
    Id: string
    MetricStat?: { Metric: { Namespace: string; MetricName: string; Dimensions: { Name: string; Value: unknown }[] } }
  }[]
}
interface Resource {
  Type: string
  Properties?: Props
  DependsOn?: string | string[]
  Condition?: string
}
interface Template {
  Resources: Record<string, Resource>
  Outputs?: Record<string, { Value?: unknown; Condition?: string }>
  Parameters?: Record<string, { Default?: string; AllowedValues?: string[] }>
  Conditions?: Record<string, unknown>
}
interface Statement {
  Effect: string
  Action: string | string[]
  Resource: unknown
  Condition?: Record<string, Record<string, unknown>>
}

type Packaged = { dir: string; template: Template }

let root: string
let base: Packaged
let tuned: Packaged
const TOPIC = 'arn:aws:sns:eu-central-1:123456789012:actions-alerts'

/** Runs `osls package` into `dir` with no AWS credentials at all: packaging must work offline. */
async function packageStack(dir: string, params: string[] = []): Promise<Packaged> {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE', 'AWS_DEFAULT_PROFILE'])
    delete env[name]
  env.AWS_SHARED_CREDENTIALS_FILE = join(root, 'no-credentials')
  env.AWS_CONFIG_FILE = join(root, 'no-config')
  try {
    await run('npx', ['osls', 'package', '--stage', 'dev', '--package', dir, ...params.map(p => `--param=${p}`)], {
      cwd: repoRoot,
      env,
      timeout: PACKAGE_TIMEOUT_MS,
      maxBuffer: 16 * 1024 * 1024,
    })
  } catch (error) {
    // execFile's error carries the output; without it a packaging failure is undiagnosable.
    const out =
      error instanceof Error && 'stdout' in error ? `\n${String(error.stdout)}\n${String('stderr' in error ? error.stderr : '')}` : ''
    throw new Error(`osls package failed${out}`, { cause: error })
  }
  const template: Template = JSON.parse(await readFile(join(dir, 'cloudformation-template-update-stack.json'), 'utf8'))
  return { dir, template }
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'actions-package-'))
  // One after the other: serverless-esbuild builds in the repository's .esbuild/ folder.
  base = await packageStack(join(root, 'default'))
  tuned = await packageStack(join(root, 'tuned'), [
    'cloudwatchMetrics=false',
    'pushgatewayUrl=https://pushgateway.example.internal',
    'lambdaRuntime=nodejs24.x',
    `alarmTopicArn=${TOPIC}`,
    'enqueueReservedConcurrency=25',
    'enqueueDbPoolMax=1',
    'dispatchDbPoolMax=6',
    'sweeperDbPoolMax=1',
    'webhookAllowedNetworks=172.16.0.0/12',
    'dbPreparedStatements=false',
    'adminReservedConcurrency=3',
    'adminDbPoolMax=1',
    'adminBearerUrl=false',
  ])
}, 2 * PACKAGE_TIMEOUT_MS)

afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true })
})

const ref = (logicalId: string): Ref => ({ Ref: logicalId })
const getAtt = (logicalId: string, attribute: string): GetAtt => ({ 'Fn::GetAtt': [logicalId, attribute] })
const logicalIdOf = (fn: string) => `${fn[0]!.toUpperCase()}${fn.slice(1)}LambdaFunction`

function resource(t: Template, logicalId: string): Props {
  const r = t.Resources[logicalId]
  if (!r?.Properties) throw new Error(`template has no resource ${logicalId}`)
  return r.Properties
}

function ofType(t: Template, type: string): [string, Props][] {
  const found: [string, Props][] = []
  for (const [id, r] of Object.entries(t.Resources)) if (r.Type === type) found.push([id, r.Properties ?? {}])
  return found
}

function roleStatements(t: Template): Statement[] {
  return (resource(t, 'IamRoleLambdaExecution').Policies ?? []).flatMap(p => p.PolicyDocument.Statement)
}

const actionsOf = (s: Statement) => (Array.isArray(s.Action) ? s.Action : [s.Action])
const asList = (v: unknown): unknown[] => (Array.isArray(v) ? v : [v])

function num(v: unknown, what: string): number {
  if (typeof v !== 'number') throw new Error(`${what}: expected a number, got ${JSON.stringify(v)}`)
  return v
}

/** Entries of a zip archive, read through its central directory (sizes there are always right). */
function unzip(buf: Buffer): Map<string, Buffer> {
  let eocd = buf.length - 22
  while (eocd >= 0 && buf.readUInt32LE(eocd) !== 0x06054b50) eocd--
  if (eocd < 0) throw new Error('not a zip archive')
  const entries = new Map<string, Buffer>()
  let at = buf.readUInt32LE(eocd + 16)
  for (let i = buf.readUInt16LE(eocd + 10); i > 0; i--) {
    if (buf.readUInt32LE(at) !== 0x02014b50) throw new Error('corrupt zip central directory')
    const method = buf.readUInt16LE(at + 10)
    const size = buf.readUInt32LE(at + 20)
    const nameLength = buf.readUInt16LE(at + 28)
    const next = at + 46 + nameLength + buf.readUInt16LE(at + 30) + buf.readUInt16LE(at + 32)
    const name = buf.toString('utf8', at + 46, at + 46 + nameLength)
    const local = buf.readUInt32LE(at + 42)
    const start = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28)
    const data = buf.subarray(start, start + size)
    if (method !== 0 && method !== 8) throw new Error(`zip entry ${name}: unsupported compression ${method}`)
    entries.set(name, method === 8 ? inflateRawSync(data) : data)
    at = next
  }
  return entries
}

/** Settings of lib/config.ts that are no params, and why. */
const NOT_PARAMS: Record<string, string> = {
  AWS_REGION: 'reserved: Lambda sets it',
  AWS_LAMBDA_LOG_STREAM_NAME: 'reserved: Lambda sets it',
  DATABASE_URL: 'a secret: held in SSM, named by DATABASE_URL_SSM_PARAMETER',
  SIGNAL_QUEUE_URL: 'the signal queue resource',
  METRICS_STAGE: 'the deployment stage (${sls:stage}), which the alarms match',
}

/** Where the template's default deliberately differs from the schema's (the schema's suits local runs and tests). */
const TEMPLATE_DEFAULTS: Record<string, Partial<Record<Fn, string>>> = {
  // One transaction per enqueue invocation, one sweep at a time: 2 connections each (the connection budget).
  DB_POOL_MAX: { enqueue: '2', sweeper: '2', admin: '2', relay: '2' },
  // On AWS metrics are EMF lines by default; locally and in tests they are off unless asked for.
  CLOUDWATCH_METRICS: { enqueue: 'true', dispatch: 'true', sweeper: 'true', admin: 'true', relay: 'true' },
  DATABASE_URL_SSM_PARAMETER: Object.fromEntries(FUNCTIONS.map(fn => [fn, '/contember-actions/dev/database-url'])),
}

describe('osls package --stage dev', () => {
  it('defines the five functions on nodejs22.x / arm64 with their handlers', () => {
    const fns = ofType(base.template, 'AWS::Lambda::Function')
    expect(fns.map(([id]) => id).sort()).toEqual(FUNCTIONS.map(logicalIdOf).sort())
    for (const fn of FUNCTIONS) {
      const p = resource(base.template, logicalIdOf(fn))
      expect(p.FunctionName).toBe(`contember-actions-dev-${fn}`)
      expect(p.Runtime).toBe('nodejs22.x')
      expect(p.Architectures).toEqual(['arm64'])
      expect(p.Handler).toBe(`functions/${fn}.handler`)
      expect(p.VpcConfig).toBeUndefined()
    }
  })

  it('builds one zip per function holding an ES module bundle that loads', async () => {
    for (const fn of FUNCTIONS) {
      const key = resource(base.template, logicalIdOf(fn)).Code?.S3Key ?? ''
      expect(key.endsWith(`/${fn}.zip`)).toBe(true)
      const zipPath = join(base.dir, `${fn}.zip`)
      expect((await stat(zipPath)).size).toBeGreaterThan(0)
      const entries = unzip(await readFile(zipPath))
      // package.individually: each function carries its own bundle (and source map), nothing of
      // the others, and no node_modules (everything is bundled).
      const names = [...entries.keys()]
      expect(names).toContain(`functions/${fn}.mjs`)
      expect(names).toContain(`functions/${fn}.mjs.map`)
      for (const other of FUNCTIONS.filter(f => f !== fn)) expect(names).not.toContain(`functions/${other}.mjs`)
      expect(names.filter(n => n.startsWith('node_modules/'))).toEqual([])
      // Importing the bundle in a plain Node process catches ESM/CommonJS interop breakage
      // (e.g. "Dynamic require of ... is not supported") that only shows at cold start.
      const out = join(root, 'unzipped', fn)
      for (const [name, data] of entries) {
        await mkdir(dirname(join(out, name)), { recursive: true })
        await writeFile(join(out, name), data)
      }
      // The function's own environment, as Lambda would set it (CloudFormation references and
      // the SSM-held URL replaced by stand-ins), in case a module reads it at import time.
      const vars = resource(base.template, logicalIdOf(fn)).Environment?.Variables ?? {}
      const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '', AWS_REGION: 'eu-central-1' }
      for (const [name, value] of Object.entries(vars)) if (typeof value === 'string') env[name] = value
      env.SIGNAL_QUEUE_URL = 'https://sqs.eu-central-1.amazonaws.com/123456789012/contember-actions-dev-signal'
      env.DATABASE_URL = 'postgres://actions@127.0.0.1:9/actions'
      const probe = 'const m = await import(process.argv[1]); if (typeof m.handler !== "function") throw new Error("no handler export")'
      await run(process.execPath, ['--input-type=module', '-e', probe, join(out, 'functions', `${fn}.mjs`)], { env, timeout: 30_000 })
    }
  })

  it('drives dispatch from the signal queue with partial batch failures and bounded concurrency', () => {
    const mappings = ofType(base.template, 'AWS::Lambda::EventSourceMapping')
    expect(mappings).toHaveLength(1)
    const [, m] = mappings[0]!
    expect(m.FunctionName).toEqual(getAtt('DispatchLambdaFunction', 'Arn'))
    expect(m.EventSourceArn).toEqual(getAtt('SignalQueue', 'Arn'))
    expect(m.BatchSize).toBe(10)
    // No batching window (absent means 0): a signal wakes dispatch at once (enqueue-to-delivery latency).
    expect(m.MaximumBatchingWindowInSeconds ?? 0).toBe(0)
    expect(m.FunctionResponseTypes).toEqual(['ReportBatchItemFailures'])
    const maxConcurrency = num(m.ScalingConfig?.MaximumConcurrency, 'MaximumConcurrency')
    expect(maxConcurrency).toBe(4)
    // The code's idea of the concurrency comes from the same param.
    const env = resource(base.template, 'DispatchLambdaFunction').Environment?.Variables ?? {}
    expect(env.DISPATCH_MAX_CONCURRENCY).toBe(String(maxConcurrency))
  })

  it('gives the signal queue a visibility timeout of at least 6x the dispatch timeout and a DLQ', () => {
    const dispatchTimeout = num(resource(base.template, 'DispatchLambdaFunction').Timeout, 'dispatch Timeout')
    const queue = resource(base.template, 'SignalQueue')
    expect(num(queue.VisibilityTimeout, 'VisibilityTimeout')).toBeGreaterThanOrEqual(6 * dispatchTimeout)
    expect(queue.RedrivePolicy?.deadLetterTargetArn).toEqual(getAtt('SignalDeadLetterQueue', 'Arn'))
    expect(num(queue.RedrivePolicy?.maxReceiveCount, 'maxReceiveCount')).toBeGreaterThanOrEqual(5)
    expect(resource(base.template, 'SignalDeadLetterQueue').MessageRetentionPeriod).toBe(14 * 24 * 3600)
  })

  it('runs the sweeper every minute from an EventBridge rule', () => {
    const rules = ofType(base.template, 'AWS::Events::Rule')
    // Two schedules: the sweeper's and the relay's (each rule targets one function).
    expect(rules).toHaveLength(2)
    const targetOf = (r: (typeof rules)[number]) => JSON.stringify(r[1].Targets?.map(t => t.Arn))
    const relayRule = rules.find(r => targetOf(r) === JSON.stringify([getAtt('RelayLambdaFunction', 'Arn')]))
    expect(relayRule?.[1].ScheduleExpression).toBe('rate(1 minute)')
    expect(resource(base.template, 'RelayLambdaFunction').ReservedConcurrentExecutions).toBe(1)
    const [ruleId, rule] = rules.find(r => targetOf(r) === JSON.stringify([getAtt('SweeperLambdaFunction', 'Arn')]))!
    expect(rule.ScheduleExpression).toBe('rate(1 minute)')
    expect(rule.State).toBe('ENABLED')
    expect(rule.Targets?.map(t => t.Arn)).toEqual([getAtt('SweeperLambdaFunction', 'Arn')])
    expect(ofType(base.template, 'AWS::Scheduler::Schedule')).toHaveLength(0)
    // A singleton whose stale invocations are dropped, not retried or queued behind each other.
    expect(resource(base.template, 'SweeperLambdaFunction').ReservedConcurrentExecutions).toBe(1)
    const invokeConfigs = ofType(base.template, 'AWS::Lambda::EventInvokeConfig').map(([, c]) => c)
    expect(invokeConfigs).toContainEqual(expect.objectContaining({ MaximumEventAgeInSeconds: 60, MaximumRetryAttempts: 0 }))
    const permissions = ofType(base.template, 'AWS::Lambda::Permission').map(([, p]) => p)
    expect(permissions).toContainEqual(
      expect.objectContaining({
        FunctionName: getAtt('SweeperLambdaFunction', 'Arn'),
        Principal: 'events.amazonaws.com',
        SourceArn: getAtt(ruleId, 'Arn'),
      }),
    )
  })

  it('grants least privilege: SendMessage on the signal queue only, no wildcard actions', () => {
    const statements = roleStatements(base.template)
    for (const s of statements) {
      for (const action of actionsOf(s)) expect(action, JSON.stringify(s)).not.toContain('*')
    }
    const send = statements.filter(s => actionsOf(s).includes('sqs:SendMessage'))
    expect(send).toHaveLength(1)
    expect(actionsOf(send[0]!)).toEqual(['sqs:SendMessage'])
    expect(asList(send[0]!.Resource)).toEqual([getAtt('SignalQueue', 'Arn')])
    // Every SQS permission, the event source's included, is on the signal queue alone.
    for (const s of statements.filter(s => actionsOf(s).some(a => a.startsWith('sqs:')))) {
      expect(asList(s.Resource)).toEqual([getAtt('SignalQueue', 'Arn')])
    }
    expect(statements.flatMap(actionsOf)).not.toContain('cloudwatch:PutMetricData')
    // No VPC, hence no ENI-management managed policy either.
    expect(resource(base.template, 'IamRoleLambdaExecution').ManagedPolicyArns).toBeUndefined()
  })

  it('allows reading exactly the database-URL parameter', () => {
    const statements = roleStatements(base.template)
    const get = statements.filter(s => actionsOf(s).some(a => a.startsWith('ssm:')))
    expect(get).toHaveLength(1)
    expect(actionsOf(get[0]!)).toEqual(['ssm:GetParameter'])
    expect(JSON.stringify(get[0]!.Resource)).toContain(':parameter/contember-actions/dev/database-url"')
    const decrypt = statements.filter(s => actionsOf(s).some(a => a.startsWith('kms:')))
    expect(decrypt).toHaveLength(1)
    expect(actionsOf(decrypt[0]!)).toEqual(['kms:Decrypt'])
    const condition = decrypt[0]!.Condition?.StringEquals ?? {}
    expect(Object.keys(condition).sort()).toEqual(['kms:EncryptionContext:PARAMETER_ARN', 'kms:ViaService'])
  })

  it('writes EMF metric lines by default, the Pushgateway being optional, and grants no CloudWatch permission for them', () => {
    for (const fn of FUNCTIONS) {
      const env = resource(base.template, logicalIdOf(fn)).Environment?.Variables ?? {}
      expect(env.CLOUDWATCH_METRICS).toBe('true')
      expect(env.CLOUDWATCH_NAMESPACE).toBe('Contember/Actions')
      expect(env.PUSHGATEWAY_URL).toBe('')
      const off = resource(tuned.template, logicalIdOf(fn)).Environment?.Variables ?? {}
      expect(off.CLOUDWATCH_METRICS).toBe('false')
      expect(off.PUSHGATEWAY_URL).toBe('https://pushgateway.example.internal')
    }
    expect(
      roleStatements(base.template)
        .flatMap(actionsOf)
        .filter(a => a.startsWith('cloudwatch:')),
    ).toEqual([])
    expect(roleStatements(tuned.template)).toEqual(roleStatements(base.template))
  })

  it("caps enqueue by reserved concurrency and sizes each function's pool from its own param", () => {
    const poolOf = (t: Template, fn: Fn) => resource(t, logicalIdOf(fn)).Environment?.Variables?.DB_POOL_MAX
    expect(resource(base.template, 'EnqueueLambdaFunction').ReservedConcurrentExecutions).toBe(10)
    expect(FUNCTIONS.map(fn => poolOf(base.template, fn))).toEqual(['2', '10', '2', '2', '2'])
    expect(resource(tuned.template, 'EnqueueLambdaFunction').ReservedConcurrentExecutions).toBe(25)
    expect(FUNCTIONS.map(fn => poolOf(tuned.template, fn))).toEqual(['1', '6', '1', '1', '2'])
    expect(resource(base.template, 'AdminLambdaFunction').ReservedConcurrentExecutions).toBe(5)
    expect(resource(tuned.template, 'AdminLambdaFunction').ReservedConcurrentExecutions).toBe(3)
    // The sweeper stays a singleton whatever the params.
    expect(resource(tuned.template, 'SweeperLambdaFunction').ReservedConcurrentExecutions).toBe(1)
  })

  it('takes the Lambda runtime from a param: nodejs24.x is accepted', () => {
    for (const fn of FUNCTIONS) expect(resource(tuned.template, logicalIdOf(fn)).Runtime).toBe('nodejs24.x')
  })

  it('alarms on a non-empty DLQ and on dispatch errors', () => {
    const alarms = ofType(base.template, 'AWS::CloudWatch::Alarm').map(([, a]) => a)
    expect(alarms).toContainEqual(
      expect.objectContaining({
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Dimensions: [{ Name: 'QueueName', Value: getAtt('SignalDeadLetterQueue', 'QueueName') }],
        Threshold: 0,
        ComparisonOperator: 'GreaterThanThreshold',
      }),
    )
    expect(alarms).toContainEqual(
      expect.objectContaining({
        Namespace: 'AWS/Lambda',
        MetricName: 'Errors',
        Dimensions: [{ Name: 'FunctionName', Value: ref('DispatchLambdaFunction') }],
        Threshold: 0,
        ComparisonOperator: 'GreaterThanThreshold',
      }),
    )
  })

  it('passes configuration the functions accept, and no secret', () => {
    const known = new Set([...Object.keys(configSchema.shape), 'NODE_OPTIONS'])
    for (const fn of FUNCTIONS) {
      const vars = resource(base.template, logicalIdOf(fn)).Environment?.Variables ?? {}
      expect(vars.SIGNAL_QUEUE_URL).toEqual(ref('SignalQueue'))
      // The secret is fetched at cold start; the template carries only the parameter's name.
      expect(vars).not.toHaveProperty('DATABASE_URL')
      expect(vars.DATABASE_URL_SSM_PARAMETER).toBe('/contember-actions/dev/database-url')
      // A misspelt variable would be silently ignored by the config loader.
      for (const name of Object.keys(vars)) expect(known, `${fn}: unknown variable ${name}`).toContain(name)
      // The deployed values pass the same validation as a cold start (with the URLs resolved).
      const strings = Object.fromEntries(Object.entries(vars).filter((e): e is [string, string] => typeof e[1] === 'string'))
      expect(() =>
        loadConfig({
          ...strings,
          DATABASE_URL: 'postgres://actions@db.internal:5432/actions',
          SIGNAL_QUEUE_URL: 'https://sqs.eu-central-1.amazonaws.com/123456789012/contember-actions-dev-signal',
        }),
      ).not.toThrow()
    }
    // Nowhere in the template: a connection URL with a password, or anything secret-looking.
    const text = JSON.stringify(base.template)
    expect(text).not.toMatch(/[a-z][a-z0-9+.-]*:\/\/[^/\s"@:]+:[^/\s"@]+@/i)
    expect(text).not.toMatch(/postgres(ql)?:\/\//i)
    expect(text).not.toMatch(/"[A-Z_]*(PASSWORD|SECRET|TOKEN)[A-Z_]*"\s*:/)
  })

  it('notifies the alarm topic when an alarm fires and when it clears, and carries no empty ARN without one', () => {
    const alarms = (t: Template) => ofType(t, 'AWS::CloudWatch::Alarm').map(([, a]) => a)
    expect(tuned.template.Parameters?.AlarmTopicArn?.Default).toBe(TOPIC)
    expect(base.template.Parameters?.AlarmTopicArn?.Default).toBe('')
    for (const a of alarms(tuned.template)) {
      expect(a.AlarmActions, a.AlarmName).toEqual({ 'Fn::If': ['HasAlarmTopic', [ref('AlarmTopicArn')], ref('AWS::NoValue')] })
      expect(a.OKActions, a.AlarmName).toEqual(a.AlarmActions)
    }
    // Without a topic, no alarm names an empty ARN (cfn-lint's E3033 was exactly that).
    for (const [, a] of ofType(base.template, 'AWS::CloudWatch::Alarm'))
      expect(JSON.stringify([a.AlarmActions, a.OKActions])).not.toContain('""')
  })

  it("mirrors the Prometheus alerts with CloudWatch alarms on the engine's EMF metrics, plus queue age and throttles", () => {
    const alarms = ofType(base.template, 'AWS::CloudWatch::Alarm').map(([, a]) => a)
    expect(alarms.map(a => String(a.AlarmName).replace('contember-actions-dev-', '')).sort()).toEqual([
      'backlog',
      'dispatch-crashing',
      'dispatch-errors',
      'dispatch-throttles',
      'enqueue-throttles',
      'events-failing',
      'heartbeat-stale',
      'metrics-push-failing',
      'oldest-due-event',
      'signal-dlq-not-empty',
      'signal-queue-age',
      'sweeper-errors',
      'sweeper-not-running',
      'target-needs-operator',
      'target-paused',
    ])
    // Every alarm on the engine's namespace reads a metric the EMF writer emits, under the rollup dimensions it writes.
    const written = new Set<string>(EMF_METRICS.map(m => m.name))
    const rollup = [
      { Name: 'service', Value: 'contember-actions' },
      { Name: 'stage', Value: 'dev' },
    ]
    const own = alarms.flatMap(a => [
      ...(a.Namespace === 'Contember/Actions' ? [{ MetricName: a.MetricName, Dimensions: a.Dimensions }] : []),
      ...(a.Metrics ?? []).flatMap(m => (m.MetricStat?.Metric.Namespace === 'Contember/Actions' ? [m.MetricStat.Metric] : [])),
    ])
    expect(own.length).toBeGreaterThanOrEqual(9)
    for (const m of own) {
      expect(written, String(m.MetricName)).toContain(m.MetricName)
      expect(m.Dimensions?.slice(0, 2), String(m.MetricName)).toEqual(rollup)
    }
    expect(alarms).toContainEqual(
      expect.objectContaining({
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateAgeOfOldestMessage',
        Dimensions: [{ Name: 'QueueName', Value: getAtt('SignalQueue', 'QueueName') }],
      }),
    )
    expect(alarms).toContainEqual(
      expect.objectContaining({
        Namespace: 'AWS/Lambda',
        MetricName: 'Throttles',
        Dimensions: [{ Name: 'FunctionName', Value: ref('DispatchLambdaFunction') }],
      }),
    )
  })

  it("makes every setting of lib/config.ts deployable as a param with the schema's own default", () => {
    let checked = 0
    for (const [key, schema] of Object.entries(configSchema.shape)) {
      if (key in NOT_PARAMS) continue
      // What a cold start would make of an unset variable, and of the template's value (empty means unset there too).
      const fallback: unknown = schema.safeParse(undefined).data
      // The relay's settings go to the relay function only: RELAY_SOURCES holds the Contember databases' passwords.
      const only = key.startsWith('RELAY_')
      if (only)
        for (const fn of FUNCTIONS.filter(f => f !== 'relay'))
          expect(resource(base.template, logicalIdOf(fn)).Environment?.Variables?.[key]).toBeUndefined()
      for (const fn of only ? (['relay'] as const) : FUNCTIONS) {
        const value = resource(base.template, logicalIdOf(fn)).Environment?.Variables?.[key]
        expect(typeof value, `${fn}: ${key} is not in the template`).toBe('string')
        const expected = TEMPLATE_DEFAULTS[key]?.[fn]
        if (expected !== undefined) {
          expect(value, `${fn}: ${key}`).toBe(expected)
          continue
        }
        // An optional setting without a default is the empty string: the config treats it as unset.
        if (fallback === undefined) expect(value, `${fn}: ${key}`).toBe('')
        const parsed = schema.safeParse(value === '' ? undefined : value)
        expect(parsed.success, `${fn}: ${key}=${String(value)} does not validate`).toBe(true)
        expect(parsed.data, `${fn}: ${key}'s param default differs from the schema's`).toEqual(fallback)
        checked++
      }
    }
    expect(checked).toBeGreaterThan(3 * 30)
  })

  it('outputs what callers and operators need', () => {
    expect(base.template.Outputs).toHaveProperty('EnqueueFunctionName')
    expect(base.template.Outputs).toHaveProperty('SignalQueueUrl')
    expect(base.template.Outputs?.AdminFunctionName?.Value).toEqual(ref('AdminLambdaFunction'))
    expect(base.template.Outputs?.AdminLambdaFunctionUrl?.Value).toEqual(getAtt('AdminLambdaFunctionUrl', 'FunctionUrl'))
    expect(base.template.Outputs?.AdminBearerFunctionUrl?.Value).toEqual(getAtt('AdminBearerFunctionUrl', 'FunctionUrl'))
  })

  it('opens the admin function by two doors: its own URL with AuthType AWS_IAM, the bearer alias with AuthType NONE', () => {
    const urls = Object.fromEntries(ofType(base.template, 'AWS::Lambda::Url'))
    expect(Object.keys(urls).sort()).toEqual(['AdminBearerFunctionUrl', 'AdminLambdaFunctionUrl'])
    // The operators' door: the unqualified function, so its invocations carry no qualifier (functions/admin.ts doorOf).
    expect(urls['AdminLambdaFunctionUrl']?.AuthType).toBe('AWS_IAM')
    expect(urls['AdminLambdaFunctionUrl']?.TargetFunctionArn).toEqual(getAtt('AdminLambdaFunction', 'Arn'))
    expect(urls['AdminLambdaFunctionUrl']?.Qualifier).toBeUndefined()
    // The public door is the alias the handler knows by name: a request through it is never system.
    expect(urls['AdminBearerFunctionUrl']?.AuthType).toBe('NONE')
    expect(urls['AdminBearerFunctionUrl']?.TargetFunctionArn).toEqual(getAtt('AdminLambdaFunction', 'Arn'))
    expect(urls['AdminBearerFunctionUrl']?.Qualifier).toBe(BEARER_ALIAS)
    expect(asList(base.template.Resources['AdminBearerFunctionUrl']?.DependsOn)).toEqual(['AdminBearerAlias'])
    const aliases = ofType(base.template, 'AWS::Lambda::Alias')
    expect(aliases.map(([id, a]) => [id, a.FunctionName, a.Name, a.FunctionVersion])).toEqual([
      ['AdminBearerAlias', ref('AdminLambdaFunction'), BEARER_ALIAS, '$LATEST'],
    ])

    // Everyone may call the alias, and only through its URL; nothing opens the function itself to '*'.
    const permissions = ofType(base.template, 'AWS::Lambda::Permission').map(([, p]) => p)
    const open = permissions.filter(p => p.Principal === '*')
    expect(open).toHaveLength(2)
    for (const p of open) expect(p.FunctionName).toEqual(ref('AdminBearerAlias'))
    expect(open.find(p => p.Action === 'lambda:InvokeFunctionUrl')?.FunctionUrlAuthType).toBe('NONE')
    expect(open.find(p => p.Action === 'lambda:InvokeFunction')?.InvokedViaFunctionUrl).toBe(true)
    expect(permissions.filter(p => p.FunctionUrlAuthType === 'AWS_IAM')).toEqual([])

    // The public door can be left out (adminBearerUrl=false): every part of it, and its output, hangs on one condition.
    const bearerParts = ['AdminBearerAlias', 'AdminBearerFunctionUrl', 'AdminBearerUrlPermission', 'AdminBearerInvokePermission']
    for (const t of [base, tuned]) {
      for (const id of bearerParts) expect(t.template.Resources[id]?.Condition, id).toBe('HasAdminBearerUrl')
      expect(t.template.Outputs?.AdminBearerFunctionUrl?.Condition).toBe('HasAdminBearerUrl')
      expect(t.template.Conditions?.HasAdminBearerUrl).toEqual({ 'Fn::Equals': [ref('AdminBearerUrl'), 'true'] })
      expect(t.template.Parameters?.AdminBearerUrl?.AllowedValues).toEqual(['true', 'false'])
      expect(t.template.Resources['AdminLambdaFunctionUrl']?.Condition).toBeUndefined()
    }
    expect(base.template.Parameters?.AdminBearerUrl?.Default).toBe('true')
    expect(tuned.template.Parameters?.AdminBearerUrl?.Default).toBe('false')

    const admin = resource(base.template, 'AdminLambdaFunction')
    expect(admin.Handler).toBe('functions/admin.handler')
    expect(admin.Timeout).toBe(30)
    // It signals the dispatcher after a retry: the one SendMessage statement of the shared role covers it.
    expect(admin.Environment?.Variables?.SIGNAL_QUEUE_URL).toEqual(ref('SignalQueue'))
    expect(roleStatements(base.template).filter(s => actionsOf(s).includes('sqs:SendMessage'))).toHaveLength(1)
  })
})

// cfn-lint checks the template against CloudFormation's own resource specifications, as AWS would on deploy.
const cfnLint = findBinary('cfn-lint')

describe('cfn-lint on the packaged templates', () => {
  if (!cfnLint)
    console.warn('\n*** SKIPPED: cfn-lint not installed (pip install cfn-lint; .ci/run installs it). The template was NOT linted. ***\n')

  it.skipIf(!cfnLint)(
    'reports no error and no warning, with and without an alarm topic',
    async () => {
      for (const packaged of [base, tuned]) {
        const template = join(packaged.dir, 'cloudformation-template-update-stack.json')
        // Exit code 0: no error, no warning, no informational finding; the output says which otherwise.
        const out = await run(cfnLint ?? 'cfn-lint', ['--format', 'parseable', '--', template], { timeout: 120_000 }).then(
          () => '',
          (error: unknown) => (error instanceof Error && 'stdout' in error ? String(error.stdout) || error.message : String(error)),
        )
        expect(out, packaged.dir).toBe('')
      }
    },
    240_000,
  )
})
