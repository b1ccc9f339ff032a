/**
 * Where a discovered backend's KV events come from (docs/discovery.md "KV events"): one template
 * for the whole fleet, as its pods all publish on the same port of their own address. A ZeroMQ
 * template names each engine's own endpoint with `{host}` where the engine's address goes
 * (`tcp://{host}:5557`: vLLM's `--kv-events-config` publisher, SGLang's); a NATS event source
 * (`nats://HOST:PORT[/FLEET]`, the fleet's relayed stream) is every engine's as it is, since the
 * stream names engines by URL. The replay template, ZeroMQ only, is expanded the same way.
 *
 * Checked where configured (createProxy's `discovery`, serve's `--discover-kv-events`), with the
 * caller's field names, by expanding it for a sample address: a template that cannot make an
 * endpoint is refused at start, not found as a subscription that never connects.
 */
import { isNatsEventSource } from '../../events/nats/nats-event-source.js';
import {
  checkReplayBeside,
  kvEventSource,
  ProxyOptionError,
  zmqEndpoint,
  type KvEventEndpoints,
} from './backend-spec.js';

/** The fleet's templates, as DiscoveryOptions carries them: a backend's endpoints, `{host}` unfilled. */
export type DiscoveryEventTemplates = KvEventEndpoints;

/** What stands for a discovered engine's address in a ZeroMQ template. */
export const HOST_PLACEHOLDER = '{host}';

/**
 * Checks the templates (throws ProxyOptionError naming `fields.events` or `fields.replay`), and
 * returns them trimmed.
 */
export function checkEventTemplates(
  templates: DiscoveryEventTemplates,
  fields: { events: string; replay: string },
): DiscoveryEventTemplates {
  const { kvEvents, kvReplay } = templates;
  if (kvEvents === undefined) {
    if (kvReplay !== undefined) checkReplayBeside(undefined, fields);
    return {};
  }
  if (typeof kvEvents !== 'string' || kvEvents.trim() === '')
    throw new ProxyOptionError(`${fields.events} must be a KV event source template, got ${JSON.stringify(kvEvents)}`);
  const events = kvEvents.trim();
  if (isNatsEventSource(events)) {
    if (events.includes(HOST_PLACEHOLDER))
      throw new ProxyOptionError(
        `${fields.events}: a NATS event source is the whole fleet's stream (it names engines by URL); ${HOST_PLACEHOLDER} has no place in it`,
      );
    kvEventSource(events, fields.events);
    if (kvReplay !== undefined) checkReplayBeside(events, fields);
    return { kvEvents: events };
  }
  const checked: DiscoveryEventTemplates = { kvEvents: zmqTemplate(events, fields.events) };
  if (kvReplay !== undefined) {
    if (typeof kvReplay !== 'string')
      throw new ProxyOptionError(
        `${fields.replay} must be a ZeroMQ endpoint template, got ${JSON.stringify(kvReplay)}`,
      );
    checked.kvReplay = zmqTemplate(kvReplay.trim(), fields.replay);
  }
  return checked;
}

/** A ZeroMQ template: names `{host}`, and makes an endpoint for an IPv4 and an IPv6 address. */
function zmqTemplate(template: string, field: string): string {
  if (!template.includes(HOST_PLACEHOLDER))
    throw new ProxyOptionError(
      `${field} must put ${HOST_PLACEHOLDER} where each engine's address goes (e.g. tcp://${HOST_PLACEHOLDER}:5557): one endpoint cannot be every discovered engine's, got ${JSON.stringify(template)}`,
    );
  for (const sample of ['10.0.0.1', '[fd00::1]']) zmqEndpoint(expand(template, sample), field);
  return template;
}

const expand = (template: string, host: string): string => template.replaceAll(HOST_PLACEHOLDER, host);

/**
 * The event endpoints of the backend at `url` (a discovered address: `http://HOST:PORT`), from
 * checked templates. An IPv6 host keeps its brackets, as ZeroMQ's tcp:// endpoints want it.
 */
export function backendEventEndpoints(templates: DiscoveryEventTemplates, url: string): KvEventEndpoints {
  if (templates.kvEvents === undefined) return {};
  if (isNatsEventSource(templates.kvEvents)) return { kvEvents: templates.kvEvents };
  const host = new URL(url).hostname;
  return {
    kvEvents: expand(templates.kvEvents, host),
    ...(templates.kvReplay === undefined ? {} : { kvReplay: expand(templates.kvReplay, host) }),
  };
}
