import { DeleteMessageCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs'
import { startFauxqs, type FauxqsServer } from 'fauxqs'

export type TestQueue = {
  server: FauxqsServer
  endpoint: string
  client: SQSClient
  queueUrl: string
  /** Receives (and deletes) every message visible now; returns their parsed bodies. */
  drain(): Promise<unknown[]>
  /** Messages waiting with a delay, not yet visible, with the delay left in seconds. */
  delayed(): Array<{ body: unknown; delaySeconds: number }>
  stop(): Promise<void>
}

/** An in-process SQS emulator with one queue, and the real SDK client pointed at it. */
export async function startQueue(name = 'signals'): Promise<TestQueue> {
  const server = await startFauxqs({ port: 0, logger: false })
  const endpoint = `http://127.0.0.1:${server.port}`
  const { queueUrl } = server.createQueue(name)
  const client = sqsClient(endpoint)
  return {
    server,
    endpoint,
    client,
    queueUrl,
    drain: async () => {
      const out: unknown[] = []
      for (;;) {
        const res = await client.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }))
        const msgs = res.Messages ?? []
        if (msgs.length === 0) return out
        for (const m of msgs) {
          out.push(JSON.parse(m.Body ?? 'null'))
          await client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }))
        }
      }
    },
    delayed: () =>
      (server.inspectQueue(name)?.messages.delayed ?? []).map(m => ({
        body: JSON.parse(m.body),
        delaySeconds: Math.round(((m.delayUntil ?? Date.now()) - Date.now()) / 1000),
      })),
    stop: async () => {
      client.destroy()
      await server.stop()
    },
  }
}

/** The SDK client as the functions build it, with test credentials and an explicit endpoint. */
export function sqsClient(endpoint: string): SQSClient {
  return new SQSClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } })
}
