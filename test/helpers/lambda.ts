import type { Context, SQSEvent, SQSRecord } from 'aws-lambda'
import { lambdaContext } from '../../local/lambda.js'

/** A Lambda context whose remaining time counts down from `remainingMs`, as the runtime's does. */
export function createContext(remainingMs = 60_000): Context {
  return lambdaContext('test', remainingMs)
}

/** One SQS record as Lambda hands it to the dispatch function; message `m<i>`, receipt `r<i>`. */
export function sqsRecord(body: string, i = 0): SQSRecord {
  return {
    messageId: `m${i}`,
    receiptHandle: `r${i}`,
    body,
    attributes: { ApproximateReceiveCount: '1', SentTimestamp: '0', SenderId: 'x', ApproximateFirstReceiveTimestamp: '0' },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:signals',
    awsRegion: 'us-east-1',
  }
}

/** An SQS batch of one record per body, in order (messages m0, m1, …). */
export function sqsEvent(...bodies: string[]): SQSEvent {
  return { Records: bodies.map((body, i) => sqsRecord(body, i)) }
}

/** The wake-up signal for `project`, as one SQS batch of one record. */
export function signalEvent(project: string): SQSEvent {
  return sqsEvent(JSON.stringify({ project }))
}
