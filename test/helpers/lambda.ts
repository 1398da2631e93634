import type { Context } from 'aws-lambda'

/** A Lambda context whose remaining time counts down from `remainingMs`, as the runtime's does. */
export function createContext(remainingMs = 60_000): Context {
  const deadline = Date.now() + remainingMs
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: 'test',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:us-east-1:000000000000:function:test',
    memoryLimitInMB: '1024',
    awsRequestId: 'test-request',
    logGroupName: '/aws/lambda/test',
    logStreamName: '2026/11/29/[$LATEST]test',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  }
}
