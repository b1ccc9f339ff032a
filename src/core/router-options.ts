/**
 * The Router's constructor options, checked and resolved with their defaults, with exact
 * messages naming each field (ERR_KVROUTE_INVALID_ARG_TYPE / _VALUE). Checked here once, in
 * TypeScript, for both cores: the native addon re-checks cheaply, the reference trusts these.
 */
import { invalidType, rangeError } from './errors.js';
import { feedPath } from './feed.js';
import { nativeDisabledByEnv } from './native.js';
import { resolvePolicy } from './policy-spec.js';
import type { InstanceSpec, PolicyName, PolicySpec, ResolvedPolicy, RouterOptions } from './types.js';
import { checkInteger, checkNumber, checkObject, checkString } from './validate.js';

const DEFAULT_CAPACITY_BLOCKS = 65_536;
const DEFAULT_BLOCK_SIZE = 16;
const DEFAULT_CHUNK_BYTES = 128;
const DEFAULT_STALENESS_MS = 2_000;
const DEFAULT_MAX_SESSIONS = 1 << 20;
const MAX_INSTANCES = 65_536;

/** RouterOptions, checked, with every default filled in. */
export interface ResolvedRouterOptions {
  policy: ResolvedPolicy;
  blockSize: number;
  chunkBytes: number;
  stalenessMs: number;
  maxSessions: number;
  capacityBlocks: number;
  manualClock: boolean;
  native: boolean;
  /** The shared core's handle (options.attach), or undefined for a core of its own. */
  attach: number | undefined;
  instances: InstanceSpec[];
  /** The feed path of options.engineState, or undefined for shadow state. */
  feedPath: string | undefined;
  warn: (message: string) => void;
}

export function resolveRouterOptions(options: RouterOptions): ResolvedRouterOptions {
  const o = checkObject('options', options);
  const policy = resolvePolicy(o.policy as PolicyName | PolicySpec | undefined, 'options.policy');
  const blockSize =
    o.blockSize === undefined ? DEFAULT_BLOCK_SIZE : checkInteger('options.blockSize', o.blockSize, 1, 1 << 24);
  const chunkBytes =
    o.hashChunkBytes === undefined
      ? DEFAULT_CHUNK_BYTES
      : checkInteger('options.hashChunkBytes', o.hashChunkBytes, 1, 1 << 24);
  const stalenessMs =
    o.stalenessMs === undefined ? DEFAULT_STALENESS_MS : checkNumber('options.stalenessMs', o.stalenessMs, 0, 1e12);
  const maxSessions =
    o.maxSessions === undefined
      ? DEFAULT_MAX_SESSIONS
      : checkInteger('options.maxSessions', o.maxSessions, 1, 2 ** 32 - 1);
  const capacityBlocks =
    o.capacityBlocks === undefined
      ? DEFAULT_CAPACITY_BLOCKS
      : checkInteger('options.capacityBlocks', o.capacityBlocks, 1);
  if (o.clock !== undefined && o.clock !== 'real' && o.clock !== 'manual') {
    throw rangeError(
      'ERR_KVROUTE_INVALID_ARG_VALUE',
      `options.clock must be "real" or "manual", got ${JSON.stringify(o.clock)}`,
    );
  }
  if (o.native !== undefined && typeof o.native !== 'boolean')
    throw invalidType('options.native', 'a boolean', o.native);
  const native = (o.native as boolean | undefined) ?? !nativeDisabledByEnv();
  const attach = o.attach === undefined ? undefined : checkInteger('options.attach', o.attach, 1, 2 ** 32 - 1);
  if (attach !== undefined && !native)
    throw rangeError(
      'ERR_KVROUTE_INVALID_ARG_VALUE',
      'options.attach needs the native router: a TypeScript reference core cannot be shared across threads',
    );
  const instances = instanceSpecs(o.instances);
  if (attach !== undefined && instances.length > 0)
    throw rangeError(
      'ERR_KVROUTE_INVALID_ARG_VALUE',
      'options.instances must be empty with options.attach: the shared core names its instances (adoptMirror)',
    );
  const feed = feedOption(o.engineState);
  if (o.onWarning !== undefined && typeof o.onWarning !== 'function')
    throw invalidType('options.onWarning', 'a function', o.onWarning);
  const warn =
    (o.onWarning as ((message: string) => void) | undefined) ??
    ((message: string) => process.emitWarning(message, { code: 'KVROUTE_STATE_FEED' }));
  return {
    policy,
    blockSize,
    chunkBytes,
    stalenessMs,
    maxSessions,
    capacityBlocks,
    manualClock: o.clock === 'manual',
    native,
    attach,
    instances,
    feedPath: feed,
    warn,
  };
}

/**
 * Refuses the kvEvents/kvReplay instance options of kvroute 0.1: the router core no longer owns
 * transports, so the caller subscribes the instance itself.
 */
export function refuseMovedKvEventOption(field: string, options: { kvEvents?: unknown; kvReplay?: unknown }): void {
  const key = options.kvEvents !== undefined ? 'kvEvents' : options.kvReplay !== undefined ? 'kvReplay' : undefined;
  if (key === undefined) return;
  throw rangeError(
    'ERR_KVROUTE_INVALID_ARG_VALUE',
    `${field}.${key} is no longer a Router option: add the instance, then subscribe it with ` +
      "subscribeKvEvents(router, id, { endpoint, replay }) from 'kvroute/events' (docs/kv-events.md)",
  );
}

/** options.instances: a count (engine-0 …) or ids and specs; the kvEvents options refused by name. */
function instanceSpecs(instances: unknown): InstanceSpec[] {
  if (typeof instances === 'number') {
    // A count of 0 is a router that refuses every route: the count names engine-0 … engine-N-1.
    if (instances === 0)
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        'options.instances must be a count of at least 1 (engine-0 …) or an array of instance ids ' +
          '([] to add them later with addInstance), got 0',
      );
    checkInteger('options.instances', instances, 1, MAX_INSTANCES);
    return Array.from({ length: instances }, (_, k) => ({ id: `engine-${k}` }));
  }
  if (!Array.isArray(instances))
    throw invalidType('options.instances', 'a count or an array of instance ids', instances);
  return instances.map((spec: unknown, k) => {
    if (typeof spec === 'string') return { id: spec };
    const s = checkObject(`options.instances[${k}]`, spec) as Partial<InstanceSpec> & {
      kvEvents?: unknown;
      kvReplay?: unknown;
    };
    refuseMovedKvEventOption(`options.instances[${k}]`, s);
    return {
      id: checkString(`options.instances[${k}].id`, s.id),
      capacityBlocks: s.capacityBlocks,
      models: s.models,
    };
  });
}

/** The feed path of `options.engineState`, or undefined for shadow state. */
function feedOption(engineState: unknown): string | undefined {
  if (engineState === undefined || engineState === 'shadow') return undefined;
  const spec = checkObject('options.engineState', engineState);
  if (typeof spec.shm !== 'string')
    throw invalidType('options.engineState.shm', 'a feed name or path (or engineState "shadow")', spec.shm);
  return feedPath(spec.shm);
}
