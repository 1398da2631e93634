// Why an operator verb left an event as it was, in words every door answers with (REST as a 409
// problem, GraphQL as a CONFLICT error, the CLI on stderr): the state and what to do, never a value.
import type { EventState } from '../events.js'

/** A verb's refusal: the event's state when it was refused, and the sentence saying why. */
export type Refusal = { state: EventState; reason: string }

/** The refusal of `verb` on an event in `state` that the rule does not allow, or that changed meanwhile. */
export function refusal(verb: 'retry' | 'stop', state: EventState, allowed: boolean): Refusal {
  if (allowed) return { state, reason: `the event changed state while it was being changed (a dispatcher claimed it); ${verb} it again` }
  return { state, reason: REASONS[verb][state] ?? `a ${verb} of an event in state ${state} is not allowed` }
}

const REASONS: Record<'retry' | 'stop', Partial<Record<EventState, string>>> = {
  retry: {
    processing:
      'the event is being delivered (state processing): a retry now would deliver it a second time beside the first; wait for the attempt to end',
    succeed: 'the event was delivered (state succeed): retry it with force to deliver it again',
    stopped: 'the event was stopped (state stopped): retry it with force to deliver it again',
  },
  stop: {
    succeed: 'the event was delivered (state succeed): there is nothing left to stop',
    stopped: 'the event is stopped already',
  },
}
