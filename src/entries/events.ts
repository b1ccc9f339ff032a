/**
 * kvroute/events: KV events fed into a router from outside its core (src/events/): a ZeroMQ
 * subscription per instance (subscribeKvEvents; the zeromq package loads when one starts), or
 * events your own transport received (applyKvEvents). docs/kv-events.md.
 */
export { applyKvEvents, type AppliedKvEvents } from '../events/direct-kv-events.js';
export { subscribeKvEvents, type KvEventEndpoints, type KvEventSubscription } from '../events/kv-event-subscription.js';
