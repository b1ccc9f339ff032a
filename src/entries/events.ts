/**
 * kvroute/events: KV events fed into a router from outside its core (src/events/): a ZeroMQ
 * subscription per instance (subscribeKvEvents; the zeromq package loads when one starts), the
 * fleet's NATS stream a `kvroute events relay` fills (subscribeNatsKvEvents; the NATS client loads
 * when one starts; docs/scale-out.md), or events your own transport received (applyKvEvents).
 * docs/kv-events.md.
 */
export { applyKvEvents, type AppliedKvEvents } from '../events/direct-kv-events.js';
export { subscribeKvEvents, type KvEventEndpoints, type KvEventSubscription } from '../events/kv-event-subscription.js';
export { subscribeNatsKvEvents } from '../events/nats/nats-kv-event-subscription.js';
export type { NatsEventSource } from '../events/nats/nats-event-source.js';
