// One invocation's logger: the cold-start deps with the Lambda request id on every line.
import type { Context } from 'aws-lambda'
import type { Deps } from '../../lib/deps.js'

/**
 * This invocation's view of the cold-start dependencies: every line its logger writes (EMF lines
 * included) carries the Lambda request id, so an on-call can group one invocation's lines.
 */
export function forInvocation(deps: Deps, context: Pick<Context, 'awsRequestId'>): Deps {
  return { ...deps, log: deps.log.child({ awsRequestId: context.awsRequestId }) }
}
