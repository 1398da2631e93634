import type { Context } from 'aws-lambda'

/** A Lambda context as the runtime gives one: the remaining time counts down from the function's timeout. */
export function lambdaContext(name: string, timeoutMs: number): Context {
  const deadline = Date.now() + timeoutMs
  const id = Math.random().toString(16).slice(2)
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: name,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:${name}`,
    memoryLimitInMB: '512',
    awsRequestId: id,
    logGroupName: `/aws/lambda/${name}`,
    logStreamName: `local/[$LATEST]${id}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  }
}
