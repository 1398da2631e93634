import type { Context } from 'aws-lambda'
import { lambdaContext } from '../../local/lambda.js'

/** A Lambda context whose remaining time counts down from `remainingMs`, as the runtime's does. */
export function createContext(remainingMs = 60_000): Context {
  return lambdaContext('test', remainingMs)
}
