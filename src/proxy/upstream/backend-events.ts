/**
 * A backend's KV events, from wherever its `kvEvents` says: the engine's ZeroMQ socket
 * (subscribeKvEvents, with its replay endpoint) or the fleet's NATS stream a relay fills
 * (subscribeNatsKvEvents). Either way the subscription is the instance's sink owner, closed with
 * the instance.
 */
import { subscribeKvEvents } from '../../events/kv-event-subscription.js';
import { isNatsEventSource, parseNatsEventSource } from '../../events/nats/nats-event-source.js';
import { subscribeNatsKvEvents } from '../../events/nats/nats-kv-event-subscription.js';
import type { Router } from '../../core/router.js';
import { ProxyOptionError } from './backend-spec.js';

/** The fleet of a `nats://HOST:PORT` source that names none. */
const DEFAULT_FLEET = 'default';

/**
 * Subscribes instance `id` (just added) to its events; a refused subscription (a bad endpoint)
 * removes the instance and throws, so no instance is left in the router without its backend.
 */
export function subscribeBackendEvents(router: Router, id: string, kvEvents: string, kvReplay?: string): void {
  try {
    subscribe(router, id, kvEvents, kvReplay);
  } catch (error) {
    router.removeInstance(id);
    throw error;
  }
}

function subscribe(router: Router, id: string, kvEvents: string, kvReplay?: string): void {
  if (!isNatsEventSource(kvEvents)) {
    subscribeKvEvents(router, id, { endpoint: kvEvents, replay: kvReplay });
    return;
  }
  const source = parseNatsEventSource(kvEvents, DEFAULT_FLEET);
  if (source === undefined)
    throw new ProxyOptionError(`kvEvents of ${id}: ${JSON.stringify(kvEvents)} is not a NATS event source`);
  subscribeNatsKvEvents(router, id, source);
}
