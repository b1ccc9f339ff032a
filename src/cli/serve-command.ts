/**
 * `kvroute serve`, declared; serve-verb.ts runs it.
 *
 * The flags are SETTINGS (src/cli/serve-settings.ts) plus --config, each with its help text
 * here. No flag has a commander default: resolveServeConfig must see only the flags the user gave,
 * or a default would beat a KVROUTE_* variable or the YAML file. The defaults are in the text.
 */
import type { Command } from 'commander';

import { POLICY_NAMES_TEXT } from '../core/policy-spec.js';
import { PROXY_DEFAULTS as P } from '../proxy/proxy-options.js';
import { envName, SERVE_DEFAULTS, SETTINGS, type SettingFlag } from './serve-settings.js';
import { example, runs, subcommand, withDefault } from './command-kit.js';

const MIB = 2 ** 20;

/** Per setting: the value's placeholder (none for a switch) and its help text; tsc checks that every setting has one. */
const HELP: Record<SettingFlag, readonly [string, string]> = {
  backends: ['<URL,…>', withDefault('engines to route to', 'none: 4 simulated engines in this process')],
  policy: ['<NAME>', withDefault(`routing policy: ${POLICY_NAMES_TEXT}; NAME:KEY=VALUE… sets its tunables`, P.policy)],
  costs: [
    '<learned|fixed>',
    withDefault(
      "min_ttft's prices: learned online per instance, or the preset's fixed token-equivalents (reproducible)",
      P.costs,
    ),
  ],
  'cost-prior-scale': [
    '<X>',
    withDefault(
      "multiply the learned costs' prior, the H20 preset's times, by X (0.2: engines 5x faster; estimates stay within 10x of it)",
      P.costPriorScale,
    ),
  ],
  'session-returns': [
    '<on|off>',
    withDefault('min_ttft counts the expected prefill of sessions idle between turns on their instance', 'on'),
  ],
  port: ['<P>', withDefault('listen port (0: a free port)', SERVE_DEFAULTS.port)],
  host: ['<H>', withDefault('listen address', SERVE_DEFAULTS.host)],
  'session-header': ['<H>', withDefault('session id header; without it, the body\'s "user"', P.sessionHeader)],
  'agent-session-headers': [
    '<H,…>',
    withDefault(
      'headers coding agents send their session id in, read when the session header is absent (none: read none)',
      P.agentSessionHeaders.join(','),
    ),
  ],
  'strip-extensions': ['', "remove kvroute's body fields (hash_ids) before forwarding"],
  retries: ['<N>', withDefault('re-routes after a failure before the first byte', P.retries)],
  'max-body': ['<SIZE>', withDefault('request body cap, e.g. 64MiB', `${P.maxBodyBytes / MIB}MiB`)],
  'engine-state': ['<S>', withDefault('shadow, or shm:NAME to read the engine-state feed', P.engineState)],
  'block-size': ['<B>', withDefault('tokens per hash_ids block', P.blockSize)],
  connections: ['<N>', withDefault('connection cap per backend', P.connections)],
  'connect-timeout': ['<MS>', withDefault('connecting to a backend', P.connectTimeoutMs)],
  'first-byte-timeout': ['<MS>', withDefault("a backend's first response byte", P.firstByteTimeoutMs)],
  'idle-timeout': ['<MS>', withDefault('silence from a backend mid-response', P.idleTimeoutMs)],
  'admin-token': [
    '<T>',
    'turns on /admin/* with Authorization: Bearer T (at least 16 characters; prefer KVROUTE_ADMIN_TOKEN: flags show in ps)',
  ],
  'reconcile-interval': [
    '<MS>',
    withDefault("reconcile the shadow counters with the backends' /metrics (0: off)", SERVE_DEFAULTS.reconcileMs),
  ],
  upstream: ['<C>', withDefault("completion requests' upstream client: undici or h1", P.upstream)],
  threads: [
    '<N>',
    withDefault(
      'event loops serving the port, sharing one routing core: N, or auto (one per core)',
      SERVE_DEFAULTS.threads,
    ),
  ],
  'access-log': ['<PATH>', 'one JSON line per request, appended to PATH (-: stdout); SIGHUP reopens it'],
  'max-in-flight': [
    '<N>',
    withDefault('route at most N requests at once, queue the rest (0: no limit)', P.maxInFlight),
  ],
  'queue-size': ['<N>', withDefault('requests waiting for --max-in-flight; past it 429', P.queueSize)],
  'queue-timeout': [
    '<MS>',
    withDefault('longest wait in that queue (a class may set its own); then 429', P.queueTimeoutMs),
  ],
  cluster: [
    '<NATS-URL>',
    "join the fleet's load plane over NATS (nats://HOST:PORT): share in-flight load and session placements with the other replicas (docs/scale-out.md)",
  ],
  events: [
    '<NATS-URL>',
    "read every backend's KV events from the fleet's NATS stream that `kvroute events relay` fills (nats://HOST:PORT[/FLEET]) instead of each engine's socket (docs/scale-out.md)",
  ],
  flow: [
    '<FILE>',
    'flow control: tenants, priority classes, weights, rate limits (YAML or JSON; docs/flow-control.md)',
  ],
  http: [
    '<S>',
    withDefault('the HTTP server: uws (fastest) or node (also HTTP/1.0, Host-less requests, many headers)', P.http),
  ],
  'header-timeout': [
    '<MS>',
    withDefault(
      "a client's whole request head, then 408 and closed (--http node; uws: fixed, ~10 s)",
      P.headerTimeoutMs,
    ),
  ],
  'health-interval': ['<MS>', withDefault("probe each backend's /health this often (0: off)", P.healthIntervalMs)],
  'health-timeout': ['<MS>', withDefault("a probe's timeout", P.healthTimeoutMs)],
  'health-failures': ['<N>', withDefault('failed probes in a row that take a backend out', P.healthFailures)],
  'models-interval': ['<MS>', withDefault("re-read each backend's /v1/models this often", P.modelsIntervalMs)],
  'backend-api-key': ['<K>', 'sent with model discovery (engines with --api-key; prefer KVROUTE_BACKEND_API_KEY)'],
  'request-timeout': ['<MS>', withDefault('overall deadline of a request (0: none)', P.requestTimeoutMs)],
  'offload-prefill-timeout': [
    '<MS>',
    withDefault(
      "an offload's prefill phase; then the request is served co-located (0: none)",
      P.offloadPrefillTimeoutMs,
    ),
  ],
  'max-body-memory': [
    '<SIZE>',
    withDefault('request bodies held at once; past it 503', `${P.maxBodyMemoryBytes / MIB}MiB`),
  ],
  'kv-events': [
    '<URL,…>',
    "each backend's vLLM KV event endpoint (tcp://HOST:PORT, or nats://HOST:PORT[/FLEET] for a relayed stream), in backend order; an empty entry skips one",
  ],
  'kv-replay': ['<URL,…>', 'their replay endpoints, asked for missed events (same order)'],
  tokenizer: [
    '<DIR>',
    'tokenizer for token-exact keys: DIR (tokenizer.json + tokenizer_config.json) or qwen3, or MODEL=DIR,…',
  ],
  discover: [
    '<SPEC>',
    withDefault(
      'backends from DNS: dns:NAME:PORT (A/AAAA records) or dns-srv:NAME (SRV), e.g. a Kubernetes headless Service',
      'off',
    ),
  ],
  'discover-interval': ['<MS>', withDefault('how often --discover resolves the name again', 5000)],
  'discover-dns-server': ['<HOST[:PORT],…>', withDefault('DNS servers --discover asks', "the system's")],
  'discover-kv-events': [
    '<TEMPLATE>',
    withDefault(
      "each discovered engine's KV event endpoint, {host} for its address (tcp://{host}:5557), or a nats:// event source",
      'the NATS --events source, if any',
    ),
  ],
  'discover-kv-replay': ['<TEMPLATE>', "their replay endpoint, {host} for the engine's address (tcp://{host}:5558)"],
  'otlp-endpoint': [
    '<URL>',
    withDefault(
      'export OpenTelemetry traces of requests to this OTLP/HTTP collector (http://HOST:4318); also OTEL_EXPORTER_OTLP_ENDPOINT; which requests: OTEL_TRACES_SAMPLER (default every one the client does not mark unsampled)',
      'off',
    ),
  ],
};

export function addServeCommand(program: Command): void {
  const serve = subcommand(program, 'serve', 'the routing proxy: OpenAI-compatible, cache-aware (docs/proxy.md)');
  for (const { flag } of SETTINGS) {
    const [value, help] = HELP[flag];
    serve.option(`--${flag}${value === '' ? '' : ` ${value}`}`, help);
  }
  serve.option('--config <FILE>', 'YAML settings, keys named like the flags (also KVROUTE_CONFIG)');
  serve.addHelpText(
    'after',
    `
Every flag is also a variable KVROUTE_<FLAG> (e.g. ${envName('backends')}) and a key of the --config
file; flags beat variables, which beat the file. GET / is the live dashboard, GET /metrics
Prometheus. Runs until SIGINT or SIGTERM.`,
  );
  example(serve, 'kvroute serve --backends http://10.0.0.1:8000,http://10.0.0.2:8000 --policy unified');
  runs(serve, async () => {
    const { serveVerb } = await import('./serve-verb.js');
    return (values) => serveVerb(values);
  });
}
