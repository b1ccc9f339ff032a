/**
 * Backends from DNS (docs/discovery.md): a Kubernetes headless Service names its ready pods in
 * DNS, so the fleet is a name, re-resolved every `intervalMs`.
 *
 * - `dns:NAME:PORT`: NAME's A and AAAA records, each `http://ADDRESS:PORT` (IPv6 in brackets);
 * - `dns-srv:NAME`: NAME's SRV records, each `http://TARGET:PORT` (the target host as named,
 *   resolved again by the connection, so an SRV target that moves keeps its backend).
 *
 * Each resolution is compared with the last: new backends are added (through the proxy's health
 * gate and model discovery: they take requests once their first probe passes), gone ones removed
 * (no new requests; those in flight finish). An answer that the name has no records (NXDOMAIN,
 * NODATA) is the fleet scaled to nothing; any other failure (a timeout, a refused or failing DNS
 * server) keeps the last fleet and warns, once per run of failures, so a DNS blip never empties
 * the proxy.
 *
 * Invariant: one resolution runs at a time; close() stops the timer and any later change.
 */
import { Resolver } from 'node:dns/promises';

export type DiscoverySpec = { kind: 'dns'; name: string; port: number } | { kind: 'dns-srv'; name: string };

export const DISCOVER_EXPECTED = 'dns:NAME:PORT (A/AAAA records) or dns-srv:NAME (SRV records)';

/** Parses `dns:NAME:PORT` or `dns-srv:NAME`; undefined when the text is neither. */
export function parseDiscoverSpec(text: string): DiscoverySpec | undefined {
  const srv = /^dns-srv:([A-Za-z0-9_.-]+)$/.exec(text.trim());
  if (srv !== null) return { kind: 'dns-srv', name: srv[1]! };
  const dns = /^dns:([A-Za-z0-9_.-]+):(\d{1,5})$/.exec(text.trim());
  if (dns === null || Number(dns[2]) < 1 || Number(dns[2]) > 65535) return undefined;
  return { kind: 'dns', name: dns[1]!, port: Number(dns[2]) };
}

export function describeDiscoverSpec(spec: DiscoverySpec): string {
  return spec.kind === 'dns' ? `dns:${spec.name}:${spec.port}` : `dns-srv:${spec.name}`;
}

/** Answers that mean "no such records", not "no answer". */
const EMPTY_ANSWERS = new Set(['ENOTFOUND', 'ENODATA']);

export interface DiscoveryHooks {
  /** The fleet changed: backends (URLs) to add and to remove. */
  changed(added: readonly string[], removed: readonly string[]): void;
  warn(message: string): void;
}

export class DnsDiscovery {
  private readonly resolver: Resolver;
  private current = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private failing = false;
  private running: Promise<void> | undefined;

  constructor(
    readonly spec: DiscoverySpec,
    private readonly intervalMs: number,
    private readonly hooks: DiscoveryHooks,
    /** DNS servers (`HOST` or `HOST:PORT`); the system's when absent. */
    servers?: readonly string[],
  ) {
    this.resolver = new Resolver({ timeout: 2_000, tries: 2 });
    if (servers !== undefined && servers.length > 0) this.resolver.setServers([...servers]);
  }

  /** The backends of the last resolution. */
  get backends(): string[] {
    return [...this.current];
  }

  /** Resolves once now (the first fleet), then every interval. */
  async start(): Promise<void> {
    await this.resolveOnce();
    this.schedule();
  }

  /** One resolution and its changes; never rejects. */
  resolveOnce(): Promise<void> {
    this.running ??= this.resolveAndApply().finally(() => (this.running = undefined));
    return this.running;
  }

  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      void this.resolveOnce().then(() => this.schedule());
    }, this.intervalMs);
    this.timer.unref();
  }

  private async resolveAndApply(): Promise<void> {
    let found: Set<string>;
    try {
      found = new Set(await this.lookup());
    } catch (error) {
      if (!this.failing)
        this.hooks.warn(
          `discovery ${describeDiscoverSpec(this.spec)}: resolving failed (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); keeping the last ${this.current.size} backends until it answers`,
        );
      this.failing = true;
      return;
    }
    if (this.closed) return;
    if (this.failing) this.hooks.warn(`discovery ${describeDiscoverSpec(this.spec)}: resolving again`);
    this.failing = false;
    const added = [...found].filter((b) => !this.current.has(b));
    const removed = [...this.current].filter((b) => !found.has(b));
    this.current = found;
    if (added.length > 0 || removed.length > 0) this.hooks.changed(added, removed);
  }

  /** The spec's backends; [] for an answer of no records; throws on no answer. */
  private async lookup(): Promise<string[]> {
    const spec = this.spec;
    if (spec.kind === 'dns-srv') {
      const records = await this.empty(this.resolver.resolveSrv(spec.name));
      return records.map((r) => `http://${hostPart(r.name.replace(/\.$/, ''))}:${r.port}`);
    }
    const [v4, v6] = await Promise.all([
      this.empty(this.resolver.resolve4(spec.name)),
      this.empty(this.resolver.resolve6(spec.name)),
    ]);
    return [...v4, ...v6].map((address) => `http://${hostPart(address)}:${spec.port}`);
  }

  private async empty<T>(query: Promise<T[]>): Promise<T[]> {
    try {
      return await query;
    } catch (error) {
      if (EMPTY_ANSWERS.has((error as NodeJS.ErrnoException).code ?? '')) return [];
      throw error;
    }
  }
}

/** An address or host as a URL's host part (IPv6 in brackets). */
function hostPart(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
