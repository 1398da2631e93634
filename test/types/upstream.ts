// Compile-time proof that the zod schemas and upstream's published types (`@contember/schema`) agree.
// `npm test` runs `tsc --noEmit` over test/, so a drift on either side fails the type-check; this
// file has no runtime part. Upstream's types are deeply `readonly`, zod infers mutable ones, and
// readonly-ness means nothing at runtime: the upstream-to-ours checks compare against DeepReadonly.
import type { Actions, ActionsPayload } from '@contember/schema'
import type { ActionsSchema } from '../../lib/schema/actions.js'
import type { JsonObject } from '../../lib/schema/json.js'
import type { eventPayloadSchema } from '../../lib/schema/payload.js'
import type { z } from 'zod'

// Arrays become readonly; types that are readonly already (our JSON and selection types) stay as they are.
type DeepReadonly<T> = T extends (infer E)[]
  ? ReadonlyArray<DeepReadonly<E>>
  : T extends readonly unknown[]
    ? T
    : [JsonObject] extends [T]
      ? T
      : T extends object
        ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
        : T

/** What enqueue accepts for a named trigger. */
type EventPayload = z.infer<typeof eventPayloadSchema>
/** The same with a basic payload's `trigger` required, as upstream's `AnyEventPayload` has it. */
type UpstreamPayload = EventPayload extends infer P
  ? P extends { operation: 'watch' }
    ? P
    : Omit<P, 'trigger'> & { trigger: string }
  : never

/** Compiles only when A is assignable to B. */
type Assignable<A, B> = [A] extends [B] ? true : false
const holds = <T extends true>(): T | undefined => undefined

// Every schema upstream accepts is a schema this engine accepts, and what this engine stores is one
// upstream reads. Our extra optional fields (watch `withNodes`, target `signingSecret`) are invisible
// to upstream's published types, so both directions hold.
holds<Assignable<Actions.Schema, DeepReadonly<ActionsSchema>>>()
holds<Assignable<ActionsSchema, Actions.Schema>>()
holds<Assignable<Actions.WebhookTarget, DeepReadonly<ActionsSchema['targets'][string]>>>()
holds<Assignable<Actions.AnyTrigger, DeepReadonly<ActionsSchema['triggers'][string]>>>()

// Every payload upstream builds is one enqueue accepts, and with `trigger` required the payloads are
// exactly upstream's.
holds<Assignable<ActionsPayload.AnyEventPayload, DeepReadonly<UpstreamPayload>>>()
holds<Assignable<UpstreamPayload, ActionsPayload.AnyEventPayload>>()
holds<Assignable<ActionsPayload.AnyEventPayload, DeepReadonly<EventPayload>>>()
holds<Assignable<ActionsPayload.WatchEventPayload, DeepReadonly<Extract<EventPayload, { operation: 'watch' }>>>>()
// One direction only: enqueue also accepts basic payloads WITHOUT `trigger` (producers written before
// upstream added it), which upstream's `BasicEventPayload` requires; so EventPayload is wider on purpose.
holds<Assignable<Assignable<EventPayload, ActionsPayload.AnyEventPayload>, false>>()
