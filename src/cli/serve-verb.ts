/**
 * `kvroute serve` (declared in serve-command.ts): the routing proxy (docs/proxy.md) until SIGINT or
 * SIGTERM.
 *
 * Configuration comes from flags, KVROUTE_* variables and a YAML file (src/cli/serve-config.ts);
 * any bad value is a usage error naming its source (exit 2). With no backends anywhere it starts
 * the embedded default, 4 simulated engines in this process, so `npm start` shows routing with
 * nothing else installed; the proxy itself never knows (the CLI wires the fleet).
 *
 * Output contract: stdout gets one line, `kvroute serve: listening on http://HOST:PORT`
 * (benchmarks and tests parse it; with --port 0 it shows the real port), followed only by the
 * request log when `--access-log -` sends it there; everything else goes to stderr.
 */
import { createServer, type AddressInfo } from 'node:net';

import type { Registry } from 'prom-client';

import { openAccessLog, type AccessLog } from '../proxy/observe/access-log.js';
import { adminMount } from '../proxy/observe/admin-api.js';
import { createDashboard } from '../proxy/observe/dashboard/dashboard.js';
import { createProxyMetrics } from '../proxy/observe/proxy-metrics.js';
import { ObserverList, type RequestRecord } from '../proxy/observe/proxy-observer.js';
import { ClusterLink } from '../cluster/cluster-link.js';
import { registerClusterMetrics } from '../cluster/cluster-metrics.js';
import type { ClusterOptions } from '../cluster/cluster-options.js';
import { createProxy, describeListenError, type Proxy } from '../proxy/server/proxy-server.js';
import { claimPort, type PortClaim } from '../proxy/threads/port-claim.js';
import { perThreadLimits } from '../proxy/threads/thread-limits.js';
import { ProxyThreads } from '../proxy/threads/proxy-threads.js';
import { ThreadMetrics } from '../proxy/threads/thread-metrics.js';
import { ShadowReconciler } from '../state/shadow-reconciler.js';
import { DEFAULT_DISCOVERY_INTERVAL_MS } from '../proxy/upstream/discovered-backends.js';
import { ConfigError, resolveServeConfig } from './serve-config.js';
import { envName } from './serve-settings.js';
import { startSimFleet, type SimFleet } from '../sim/sim-fleet.js';
import { counted } from './counted.js';
import { untilStopped, UsageError, type OptionValues } from './common.js';

export interface ServeHooks {
  /** Stops the server when aborted, besides SIGINT and SIGTERM. */
  signal?: AbortSignal;
}

const EMBEDDED_ENGINES = 4;

function embeddedBanner(fleet: SimFleet, base: string): string {
  const model = fleet.engines[0]!.model;
  return `kvroute serve: no backends configured (--backends, ${envName('backends')} or --config), so this is the
embedded default: ${counted(fleet.urls.length, 'simulated vLLM engine')} in this process (${fleet.urls.join(', ')}).

Try it:

  curl -s ${base}/v1/chat/completions -H 'content-type: application/json' \\
    -H 'x-session-id: demo-1' \\
    -d '{"model": "${model}", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8}' -i

  // node, with \`npm install openai\`
  import OpenAI from 'openai';
  const client = new OpenAI({ baseURL: '${base}/v1', apiKey: 'unused' });
  const reply = await client.chat.completions.create({
    model: '${model}',
    messages: [{ role: 'user', content: 'Hello!' }],
    max_tokens: 8,
  });
  console.log(reply.choices[0].message.content, reply.usage);

The x-kvroute-instance and x-kvroute-reason response headers say where each request went and why.
`;
}

/** `values`: the flags the user gave, none defaulted (serve-command.ts), so variables and the file apply. */
export async function serveVerb(values: OptionValues, hooks: ServeHooks = {}): Promise<void> {
  let config;
  try {
    config = resolveServeConfig(values, process.env);
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(error.message);
    throw error;
  }
  // Opened first: a path that cannot be written is a usage error before anything starts.
  const accessLog = config.accessLog === undefined ? undefined : await openRequestLog(config.accessLog);
  const fleet =
    config.backends.length === 0 && config.proxy.discovery === undefined
      ? await startSimFleet({ instances: EMBEDDED_ENGINES, port: 0 })
      : undefined;
  const metrics = createProxyMetrics();
  const dashboard = createDashboard({ onWarning: serveWarning });
  // Started once the proxy exists (it needs the router); placements reach it through this observer.
  let cluster: ClusterLink | undefined;
  const clusterObserver = { onRequest: (r: RequestRecord) => notePlacement(cluster, r) };
  const observers = [
    metrics.observer,
    dashboard.observer,
    ...(accessLog === undefined ? [] : [accessLog.observer]),
    ...(config.cluster === undefined ? [] : [clusterObserver]),
  ];
  const threadCount = config.threads;
  const proxyOptions = perThreadLimits(config.proxy, threadCount);
  let proxy: Proxy;
  // Made before the proxy, whose router its lock counters read once scraped.
  const threadMetrics =
    threadCount > 1 ? new ThreadMetrics(metrics.registry, () => proxy.router.lockStats(), threadCount) : undefined;
  try {
    if (threadCount > 1 && config.proxy.http === 'node')
      throw new UsageError('--threads above 1 needs the uWebSockets.js server (--http uws)');
    proxy = createProxy({
      ...proxyOptions,
      backends: fleet?.urls ?? config.backends,
      ...(config.tokenizers === undefined ? {} : { tokenizers: config.tokenizers }),
      observers: threadMetrics === undefined ? observers : [...observers, threadMetrics.observer],
      mounts: [metrics.mount, dashboard.mount, adminMount(config.adminToken)],
      // The proxy's warnings (backend health, feeds, the router) as serve's own lines, not
      // process.emitWarning's "(node:PID) [CODE] Warning: … (Use `node --trace-warnings …`)".
      onWarning: serveWarning,
    });
  } catch (error) {
    dashboard.close();
    await accessLog?.close();
    await fleet?.close();
    throw error;
  }
  const reconciler =
    config.reconcileMs > 0
      ? new ShadowReconciler({
          router: proxy.router,
          intervalMs: config.reconcileMs,
          onRound: (results) => {
            metrics.onReconcile(results);
            dashboard.onReconcile(results);
            // The engines' inter-token latency deltas: decode samples of the learned costs.
            for (const r of results)
              if (r.decode !== undefined)
                proxy.state.costs.observeDecode(r.instance, r.decode.secondsPerToken, r.decode.batch);
            for (const r of results)
              if (r.released > 0)
                process.stderr.write(
                  `kvroute serve: released ${r.released} requests ${r.instance} no longer has (its /metrics counts ${r.engineRequests})\n`,
                );
          },
        })
      : undefined;
  let port: number;
  let threads: ProxyThreads | undefined;
  let claim: PortClaim | undefined;
  try {
    if (threadCount > 1 && !proxy.router.native)
      throw new Error(
        '--threads above 1 needs the native router core (KVROUTE_NATIVE=0 selects the TypeScript reference)',
      );
    // uWS does not share a port it picked itself (port 0) with other listeners: pick one first.
    const wanted = threadCount > 1 && config.port === 0 ? await freePort(config.host) : config.port;
    // Threads share the port (SO_REUSEPORT), which another threaded serve could join: claim it first.
    if (threadCount > 1)
      claim = await claimPort(config.host, wanted).catch((error: NodeJS.ErrnoException) => {
        throw describeListenError(error, config.host, wanted);
      });
    ({ port } = await proxy.listen(wanted, config.host, { reusePort: threadCount > 1 }));
    if (threadCount > 1) {
      const { port: controlPort } = await proxy.listenControl();
      threads = await ProxyThreads.start({
        count: threadCount - 1,
        proxy,
        options: { ...proxyOptions, ...(config.tokenizers === undefined ? {} : { tokenizers: config.tokenizers }) },
        host: config.host,
        port,
        controlPort,
        observer: new ObserverList(observers, (m) => process.stderr.write(`${m}\n`)),
        // The cluster link learns sessions' placements from the request records.
        records: accessLog !== undefined || config.cluster !== undefined,
        ...(threadMetrics === undefined ? {} : { metrics: threadMetrics }),
      });
    }
  } catch (error) {
    await proxy.close({ graceMs: 0 });
    await claim?.release();
    await accessLog?.close();
    await fleet?.close();
    throw new UsageError((error as Error).message);
  }
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const base = `http://${host}:${port}`;
  if (fleet !== undefined) process.stderr.write(embeddedBanner(fleet, base));
  else
    process.stderr.write(
      `kvroute serve: ${counted(config.backends.length, 'backend')} (${proxy.state.routableCount()} healthy) · ${modelSummary(proxy)} · policy ${proxy.state.policyName} · router ${proxy.router.native ? 'native' : 'TypeScript reference'} · ${proxy.options.http} server\n`,
    );
  const fed = config.backends.filter((b) => b.kvEvents !== undefined).length;
  if (fed > 0 || config.tokenizers !== undefined)
    process.stderr.write(
      `kvroute serve: KV events from ${fed} of ${config.backends.length} backends · token keys for ${
        config.tokenizers === undefined
          ? 'token-id prompts only (no --tokenizer)'
          : Object.entries(config.tokenizers)
              .map(([model, dir]) => (model === '*' ? `any model (${dir})` : `${model} (${dir})`))
              .join(', ')
      }\n`,
    );
  process.stderr.write(
    `kvroute serve: dashboard ${base}/ · metrics ${base}/metrics · admin API ${config.adminToken === undefined ? 'off (--admin-token)' : 'on'}\n`,
  );
  const discovery = config.proxy.discovery;
  if (discovery !== undefined)
    process.stderr.write(
      `kvroute serve: discovering backends from ${discovery.spec} every ${discovery.intervalMs ?? DEFAULT_DISCOVERY_INTERVAL_MS} ms (${proxy.state.list().length} now)\n`,
    );
  const tracing = config.proxy.tracing;
  if (tracing?.endpoint !== undefined)
    process.stderr.write(
      `kvroute serve: OpenTelemetry traces to ${tracing.endpoint} as service ${tracing.serviceName ?? 'kvroute'}\n`,
    );
  if (threads !== undefined)
    process.stderr.write(
      `kvroute serve: ${threadCount} threads sharing one routing core serve ${base} (the main thread and ${threads.size} more)\n`,
    );
  reconciler?.start();
  if (config.cluster !== undefined) {
    cluster = startCluster(config.cluster, proxy, metrics.registry);
    proxy.state.readyDetail = () => ({ cluster: cluster!.status() });
  }
  const reopenLog = () =>
    void accessLog!.reopen().then(
      () => process.stderr.write(`kvroute serve: reopened the access log ${accessLog!.target}\n`),
      (error: Error) => process.stderr.write(`kvroute serve: ${error.message}\n`),
    );
  // SIGHUP reopens the request log (log rotation); without a log file it keeps its default (exit).
  if (accessLog !== undefined && accessLog.target !== '-') process.on('SIGHUP', reopenLog);
  process.stdout.write(`kvroute serve: listening on ${base}\n`);

  await untilStopped(hooks.signal);
  process.stderr.write('kvroute serve: stopping (in-flight requests get 10 s)\n');
  process.off('SIGHUP', reopenLog);
  await reconciler?.stop();
  await Promise.all([threads?.close(10_000), proxy.close({ graceMs: 10_000 })]);
  await cluster?.close(); // after the proxy: its final message says this replica holds nothing
  await claim?.release();
  await accessLog?.close(); // after the proxy: the last requests' lines are written too
  await fleet?.close();
  // Idle keep-alive client connections may hold uWS's loop open for its idle timeout; the work is
  // done, so the command does not wait for them (an unref'd timer fires only if something else
  // keeps the loop alive). Embedders stopping through `signal` keep their process.
  if (hooks.signal === undefined) setTimeout(() => process.exit(process.exitCode ?? 0), 500).unref();
}

/** Joins the fleet's load plane: the link, its metrics, peers' placements into the session tracking. */
function startCluster(options: ClusterOptions, proxy: Proxy, registry: Registry): ClusterLink {
  const link = ClusterLink.start(options, {
    router: proxy.router,
    log: (line) => process.stderr.write(`kvroute serve: ${line}\n`),
    onPeerPlacement: (session) => proxy.state.costs.arriving(session),
  });
  registerClusterMetrics(registry, () => link.counters);
  return link;
}

/** A routed request with a session tells the load plane where that session went. */
function notePlacement(cluster: ClusterLink | undefined, r: RequestRecord): void {
  if (cluster === undefined || r.session === undefined || r.instance === undefined || r.status >= 500) return;
  cluster.placed(r.session, r.instance, r.model);
}

/** A port free on `host` now (the kernel's pick for port 0, released at once). */
function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen({ host, port: 0, exclusive: true }, () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** "models A (2 backends), B (1 backend)", from the first health checks' discovery. */
function modelSummary(proxy: Proxy): string {
  const counts = new Map<string, number>();
  let unknown = 0;
  for (const b of proxy.state.snapshot()) {
    if (b.models === undefined) unknown++;
    for (const m of b.models ?? []) counts.set(m, (counts.get(m) ?? 0) + 1);
  }
  const listed = [...counts].map(([m, n]) => `${m} (${counted(n, 'backend')})`);
  if (unknown > 0) listed.push(`any model (${counted(unknown, 'backend')} not discovered yet)`);
  return `models ${listed.join(', ')}`;
}

/** The request log, or a usage error naming the path and why it cannot be opened. */
async function openRequestLog(target: string): Promise<AccessLog> {
  try {
    return await openAccessLog(target);
  } catch (error) {
    throw new UsageError(`--access-log: ${(error as Error).message}`);
  }
}

/** A warning of the proxy, the dashboard or the router, as one `kvroute serve: warning:` line. */
function serveWarning(message: string): void {
  process.stderr.write(`kvroute serve: warning: ${message.replace(/^kvroute proxy: /, '')}\n`);
}
