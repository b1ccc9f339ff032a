/**
 * The proxy's backends from DNS discovery (dns-discovery.ts), kept in ProxyState as the admin API
 * keeps its own: a discovered backend is added like POST /admin/backends (out of routing until its
 * first health probe passes, its models discovered) and removed like DELETE (no new requests; those
 * in flight finish, up to the removal grace). Backends given in `backends` are never removed by
 * discovery, and a discovered one already configured is left as it is. With the fleet's KV event
 * templates (discovery-events.ts), each added backend subscribes to its engine's events, and its
 * removal closes the subscription (the router closes an instance's event feed with it).
 */
import type { ProxyState } from '../proxy-state.js';
import { backendEventEndpoints, type DiscoveryEventTemplates } from './discovery-events.js';
import { DnsDiscovery, parseDiscoverSpec } from './dns-discovery.js';

export interface DiscoveryOptions extends DiscoveryEventTemplates {
  /** `dns:NAME:PORT` (A/AAAA) or `dns-srv:NAME` (SRV). */
  spec: string;
  /** Re-resolution period, ms (default 5,000). */
  intervalMs?: number;
  /** DNS servers to ask (`HOST` or `HOST:PORT`); default the system's (/etc/resolv.conf). */
  servers?: readonly string[];
  // kvEvents, kvReplay (DiscoveryEventTemplates): each discovered engine's KV event source, a
  // ZeroMQ endpoint with {host} for its address (tcp://{host}:5557) or the fleet's NATS stream;
  // and its replay endpoint. Without kvEvents, discovered backends are not event-fed.
}

export const DEFAULT_DISCOVERY_INTERVAL_MS = 5_000;

export interface DiscoveredBackends {
  /** The first resolution applied and its backends' first health checks done. */
  readonly ready: Promise<void>;
  close(): void;
}

export function discoverBackends(
  state: ProxyState,
  options: DiscoveryOptions,
  warn: (message: string) => void,
): DiscoveredBackends {
  const spec = parseDiscoverSpec(options.spec)!; // checked by resolveProxyOptions
  const configured = new Set(state.list().map((b) => b.id));
  let firstChecks: Promise<void>[] | undefined = [];
  const discovery = new DnsDiscovery(
    spec,
    options.intervalMs ?? DEFAULT_DISCOVERY_INTERVAL_MS,
    {
      changed(added, removed) {
        for (const url of added) {
          if (configured.has(url) || state.backend(url) !== undefined) continue;
          let check: Promise<void>;
          try {
            check = state.addBackend(url, undefined, backendEventEndpoints(options, url));
          } catch (error) {
            // An address the templates cannot make an endpoint of (an SRV target's odd name):
            // that backend is left out, said each time it is seen, and the rest go on.
            warn(`kvroute proxy: discovery cannot add backend ${url}: ${(error as Error).message}`);
            continue;
          }
          firstChecks?.push(check);
          warn(`kvroute proxy: discovery added backend ${url}; it takes requests once healthy`);
        }
        for (const url of removed) {
          if (configured.has(url) || state.backend(url) === undefined) continue;
          void state.removeBackend(url).catch(() => {});
          warn(`kvroute proxy: discovery removed backend ${url}; its requests in flight finish`);
        }
      },
      warn: (message) => warn(`kvroute proxy: ${message}`),
    },
    options.servers,
  );
  const ready = discovery.start().then(async () => {
    const checks = firstChecks ?? [];
    firstChecks = undefined;
    await Promise.all(checks);
  });
  return { ready, close: () => discovery.close() };
}
