// The local stack's signal queue: SIGNAL_QUEUE_URL when given, else the in-process fauxqs emulator with
// the signal queue and its dead-letter queue, as the deployment creates them.
import { CreateQueueCommand, GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs'
import type { AddressInfo } from 'node:net'
import { loadConfigPart, sqsConfigSchema } from '../../lib/config.js'
import { createSqsClient, sqsEndpointFromEnv } from '../../lib/deps.js'
import type { Cleanups } from './shutdown.js'

/** Receives before a signal goes to the dead-letter queue: the deployment's RedrivePolicy. */
const MAX_RECEIVE_COUNT = 5

export type Queues = { sqs: SQSClient; queueArn: string; sqsEndpoint?: string }

/** The signal queue's client and ARN; sets env.SIGNAL_QUEUE_URL when it starts the emulator. */
export async function startQueues(env: NodeJS.ProcessEnv, cleanups: Cleanups, print: (line: string) => void): Promise<Queues> {
  // The functions' bounded waits (SQS_* keys), known before the rest: the queue URL comes from the emulator.
  const sqsConfig = loadConfigPart(sqsConfigSchema, env)
  let sqs: SQSClient
  let sqsEndpoint: string | undefined
  if (!env.SIGNAL_QUEUE_URL) {
    sqsEndpoint = await startEmulator(cleanups)
    sqs = createSqsClient(sqsConfig, { endpoint: sqsEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } })
    env.SIGNAL_QUEUE_URL = await createSignalQueues(sqs)
    print(`sqs        in-process emulator at ${sqsEndpoint} (queue actions-signals, DLQ after ${MAX_RECEIVE_COUNT} receives)`)
  } else {
    // AWS_ENDPOINT_URL_SQS (LocalStack, an emulator) and keys given in `env` win over the process's.
    sqs = createSqsClient(sqsConfig, sqsEndpointFromEnv(env))
    print('sqs        SIGNAL_QUEUE_URL')
  }
  cleanups.push(async () => sqs.destroy())
  const queueArn = (await queueAttribute(sqs, env.SIGNAL_QUEUE_URL)) ?? 'arn:aws:sqs:local:000000000000:actions-signals'
  return { sqs, queueArn, ...(sqsEndpoint ? { sqsEndpoint } : {}) }
}

/** The emulator on a free loopback port; its endpoint URL. */
async function startEmulator(cleanups: Cleanups): Promise<string> {
  // fauxqs' startFauxqs listens on every interface; its app listens where we say.
  const { buildApp } = await import('fauxqs')
  const app = buildApp({ logger: false })
  await app.listen({ port: 0, host: '127.0.0.1' })
  cleanups.push(() => app.close())
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

/** The dead-letter queue, then the signal queue redriving to it; the signal queue's URL. */
async function createSignalQueues(sqs: SQSClient): Promise<string | undefined> {
  const dlq = await sqs.send(new CreateQueueCommand({ QueueName: 'actions-signals-dlq' }))
  const dlqArn = await queueAttribute(sqs, dlq.QueueUrl)
  const q = await sqs.send(
    new CreateQueueCommand({
      QueueName: 'actions-signals',
      Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: MAX_RECEIVE_COUNT }) },
    }),
  )
  return q.QueueUrl
}

async function queueAttribute(sqs: SQSClient, queueUrl: string | undefined): Promise<string | undefined> {
  return (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }))).Attributes?.QueueArn
}
