/**
 * Flow control's configuration (docs/flow-control.md): how a request's tenant and class are
 * found, the classes in priority order with their deadlines and starvation bounds, and each
 * tenant's weight and rate limits. `resolveFlowConfig` validates a raw object (a YAML `flow:`
 * section, the admin API's body) and names the bad key in every error: `flow.tenants.acme.weight
 * must be a number > 0, got -1`. Unknown keys are errors, so a typo never falls back silently.
 *
 * With no configuration at all: tenants by the `x-kvroute-tenant` header, else by API key, else
 * `default`; classes high, normal (the default) and low; every tenant weighs 1 and has no limit.
 *
 * `priorityBands` maps the body's integer `priority` (vLLM's field: lower is handled earlier,
 * default 0) to a class when the priority header is absent: ascending bands, each holding the
 * priorities up to its `upTo` (inclusive) above the previous band's, the last one open-ended, so
 * every integer has exactly one band. Unset: negative → the highest class, 0 → the default class,
 * positive → the lowest class (derived from `classes` and `defaultClass`). `[]`: the body's
 * priority never picks a class (it is still checked and forwarded).
 */
import type { TenantRateLimits } from './rate-limits.js';

export class FlowConfigError extends Error {}

export interface FlowClass {
  name: string;
  /** Longest wait in the queue, ms; undefined: the proxy's queue timeout (`--queue-timeout`). */
  deadlineMs?: number;
  /** A request at the head of the class waits at most this long behind higher classes; Infinity: no bound. */
  starveAfterMs: number;
  /** Shed the class's requests past this predicted TTFT, ms; undefined: its share of the SLO (load-shedder.ts). */
  shedAtMs?: number;
}

/** Load shedding on the fleet's predicted TTFT (load-shedder.ts). */
export interface SheddingConfig {
  /** The highest class's bound, ms; a lower class k of n is shed past sloMs × (n − k) ÷ n. */
  sloMs: number;
  /** The uncached prompt tokens of the typical request the fleet's TTFT is predicted for. */
  typicalTokens: number;
  /** How long one prediction is used, ms. */
  intervalMs: number;
}

/** Priorities up to `upTo` (inclusive) above the previous band's; the last band has no `upTo`. */
export interface PriorityBand {
  upTo?: number;
  /** A configured class's name. */
  class: string;
}

export interface FlowTenant extends TenantRateLimits {
  /** Its share of the queue relative to other tenants (default 1). */
  weight: number;
}

export interface FlowConfig {
  /** The request header that names the tenant (lower case). */
  tenantHeader: string;
  /** Without the header, the tenant is the API key's hash (`key-` + 16 hex of its SHA-256). */
  apiKeyTenants: boolean;
  /** The tenant of a request that names none. */
  defaultTenant: string;
  /** The request header that names the class (lower case). */
  priorityHeader: string;
  /** The request header that shortens a request's deadline, ms (lower case). */
  deadlineHeader: string;
  /** Highest priority first. */
  classes: FlowClass[];
  /** The class of a request that names none. */
  defaultClass: string;
  /** The body's `priority` → class, when the priority header is absent; [] ignores the field. */
  priorityBands: PriorityBand[];
  /** Tenants by name; a tenant not listed gets `tenantDefaults`. */
  tenants: Record<string, FlowTenant>;
  tenantDefaults: FlowTenant;
  /** The output tokens a request's cost counts when it sets no max_tokens. */
  expectedOutputTokens: number;
  /**
   * The fraction of `--max-in-flight` kept for tenants holding no more than their share of slots
   * (flow-controller.ts, the headroom rule): floor(maxInFlight × headroom) slots; 0: none.
   */
  headroom: number;
  /** Load shedding; undefined: off. */
  shedding?: SheddingConfig;
}

export const DEFAULT_FLOW_CONFIG: Readonly<FlowConfig> = Object.freeze({
  tenantHeader: 'x-kvroute-tenant',
  apiKeyTenants: true,
  defaultTenant: 'default',
  priorityHeader: 'x-kvroute-priority',
  deadlineHeader: 'x-kvroute-deadline-ms',
  classes: [
    { name: 'high', starveAfterMs: Infinity },
    { name: 'normal', starveAfterMs: 10_000 },
    { name: 'low', starveAfterMs: 60_000 },
  ],
  defaultClass: 'normal',
  priorityBands: [{ upTo: -1, class: 'high' }, { upTo: 0, class: 'normal' }, { class: 'low' }],
  tenants: {},
  tenantDefaults: { weight: 1 },
  expectedOutputTokens: 256,
  headroom: 0.25,
});

const TOP_KEYS = [
  'tenantHeader',
  'apiKeyTenants',
  'defaultTenant',
  'priorityHeader',
  'deadlineHeader',
  'classes',
  'defaultClass',
  'priorityBands',
  'tenants',
  'tenantDefaults',
  'expectedOutputTokens',
  'headroom',
  'shedding',
];
const CLASS_KEYS = ['name', 'deadlineMs', 'starveAfterMs', 'shedAtMs'];
const SHEDDING_KEYS = ['sloMs', 'typicalTokens', 'intervalMs'];
const TENANT_KEYS = ['weight', 'rpm', 'rpmBurst', 'tpm', 'tpmBurst'];
const BAND_KEYS = ['upTo', 'class'];
const NAME = /^[A-Za-z0-9_.:-]{1,64}$/;
const HEADER = /^[a-z0-9-]{1,64}$/;

/** Validates `raw` (undefined: every default) into a whole FlowConfig; `where` prefixes each error. */
export function resolveFlowConfig(raw: unknown, where = 'flow'): FlowConfig {
  if (raw === undefined || raw === null) return cloneDefaults();
  const o = object(raw, where, TOP_KEYS);
  const d = DEFAULT_FLOW_CONFIG;
  const classes = o.classes === undefined ? cloneDefaults().classes : classList(o.classes, `${where}.classes`);
  const defaultClass = o.defaultClass === undefined ? d.defaultClass : name(o.defaultClass, `${where}.defaultClass`);
  if (!classes.some((c) => c.name === defaultClass))
    throw new FlowConfigError(
      `${where}.defaultClass must name one of the classes (${classNames(classes)}), got "${defaultClass}"`,
    );
  const tenants: Record<string, FlowTenant> = {};
  if (o.tenants !== undefined)
    for (const [tenant, spec] of Object.entries(object(o.tenants, `${where}.tenants`))) {
      name(tenant, `${where}.tenants key`);
      tenants[tenant] = tenantSpec(spec, `${where}.tenants.${tenant}`);
    }
  return {
    tenantHeader: o.tenantHeader === undefined ? d.tenantHeader : header(o.tenantHeader, `${where}.tenantHeader`),
    apiKeyTenants: o.apiKeyTenants === undefined ? d.apiKeyTenants : bool(o.apiKeyTenants, `${where}.apiKeyTenants`),
    defaultTenant: o.defaultTenant === undefined ? d.defaultTenant : name(o.defaultTenant, `${where}.defaultTenant`),
    priorityHeader:
      o.priorityHeader === undefined ? d.priorityHeader : header(o.priorityHeader, `${where}.priorityHeader`),
    deadlineHeader:
      o.deadlineHeader === undefined ? d.deadlineHeader : header(o.deadlineHeader, `${where}.deadlineHeader`),
    classes,
    defaultClass,
    priorityBands:
      o.priorityBands === undefined
        ? defaultBands(classes, defaultClass)
        : bandList(o.priorityBands, classes, `${where}.priorityBands`),
    tenants,
    tenantDefaults:
      o.tenantDefaults === undefined
        ? { ...d.tenantDefaults }
        : tenantSpec(o.tenantDefaults, `${where}.tenantDefaults`),
    expectedOutputTokens:
      o.expectedOutputTokens === undefined
        ? d.expectedOutputTokens
        : count(o.expectedOutputTokens, `${where}.expectedOutputTokens`, 0),
    headroom: o.headroom === undefined ? d.headroom : fraction(o.headroom, `${where}.headroom`, 0.5),
    ...(o.shedding === undefined || o.shedding === null
      ? {}
      : { shedding: sheddingSpec(o.shedding, `${where}.shedding`) }),
  };
}

/**
 * The config one of `share`'s fraction of the traffic enforces: every rate limit and burst times
 * `share` (a thread of `serve --threads N` takes 1/N), so the process as a whole keeps the limits.
 */
export function scaleRateLimits(config: FlowConfig, share: number): FlowConfig {
  if (share === 1) return config;
  const scale = (t: FlowTenant): FlowTenant => {
    const out: FlowTenant = { ...t };
    for (const key of ['rpm', 'rpmBurst', 'tpm', 'tpmBurst'] as const)
      if (t[key] !== undefined) out[key] = t[key] * share;
    return out;
  };
  const tenants: Record<string, FlowTenant> = {};
  for (const [name, t] of Object.entries(config.tenants)) tenants[name] = scale(t);
  return { ...config, tenants, tenantDefaults: scale(config.tenantDefaults) };
}

/** Each config's class ranks by lower-cased name, made once per config object (configs are replaced, never mutated). */
const ranksByConfig = new WeakMap<FlowConfig, Map<string, number>>();

/** The rank of the class named `name` (any case) in `config`, or undefined for none. */
export function classRank(config: FlowConfig, name: string): number | undefined {
  let ranks = ranksByConfig.get(config);
  if (ranks === undefined) {
    ranks = new Map(config.classes.map((c, rank) => [c.name.toLowerCase(), rank]));
    ranksByConfig.set(config, ranks);
  }
  return ranks.get(name.toLowerCase());
}

export function classNames(classes: readonly FlowClass[]): string {
  return classes.map((c) => c.name).join(', ');
}

function cloneDefaults(): FlowConfig {
  const d = DEFAULT_FLOW_CONFIG;
  return {
    ...d,
    classes: d.classes.map((c) => ({ ...c })),
    priorityBands: d.priorityBands.map((b) => ({ ...b })),
    tenants: {},
    tenantDefaults: { ...d.tenantDefaults },
  };
}

/** Negative → the highest class, 0 → the default class, positive → the lowest class. */
function defaultBands(classes: readonly FlowClass[], defaultClass: string): PriorityBand[] {
  return [{ upTo: -1, class: classes[0]!.name }, { upTo: 0, class: defaultClass }, { class: classes.at(-1)!.name }];
}

/** Ascending `upTo`, every band but the last bounded, the last open: each integer falls in exactly one. */
function bandList(raw: unknown, classes: readonly FlowClass[], where: string): PriorityBand[] {
  if (!Array.isArray(raw) || raw.length > 16)
    throw new FlowConfigError(
      `${where} must be a list of up to 16 bands, lowest priorities first (e.g. [{upTo: -1, class: high}, {class: normal}]), got ${show(raw)}`,
    );
  return raw.map((entry, i) => {
    const at = `${where}[${i}]`;
    const o = object(entry, at, BAND_KEYS);
    const className = name(o.class, `${at}.class`);
    if (!classes.some((c) => c.name === className))
      throw new FlowConfigError(
        `${at}.class must name one of the classes (${classNames(classes)}), got "${className}"`,
      );
    const last = i === raw.length - 1;
    if (last) {
      if (o.upTo !== undefined && o.upTo !== null)
        throw new FlowConfigError(
          `${at}.upTo must be absent: the last band holds every priority above the one before it, got ${show(o.upTo)}`,
        );
      return { class: className };
    }
    if (typeof o.upTo !== 'number' || !Number.isSafeInteger(o.upTo))
      throw new FlowConfigError(`${at}.upTo must be an integer (every band but the last has one), got ${show(o.upTo)}`);
    const previous = i === 0 ? undefined : (raw[i - 1] as { upTo?: unknown }).upTo;
    if (typeof previous === 'number' && o.upTo <= previous)
      throw new FlowConfigError(`${at}.upTo must be greater than ${where}[${i - 1}].upTo (${previous}), got ${o.upTo}`);
    return { upTo: o.upTo, class: className };
  });
}

function classList(raw: unknown, where: string): FlowClass[] {
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > 16)
    throw new FlowConfigError(`${where} must be a list of 1 to 16 classes, highest priority first, got ${show(raw)}`);
  const seen = new Set<string>();
  return raw.map((entry, i) => {
    const at = `${where}[${i}]`;
    const o = object(entry, at, CLASS_KEYS);
    const className = name(o.name, `${at}.name`);
    if (seen.has(className)) throw new FlowConfigError(`${at}.name repeats "${className}"`);
    seen.add(className);
    return {
      name: className,
      ...(o.deadlineMs === undefined ? {} : { deadlineMs: count(o.deadlineMs, `${at}.deadlineMs`, 1) }),
      starveAfterMs:
        o.starveAfterMs === undefined || o.starveAfterMs === null || o.starveAfterMs === Infinity
          ? Infinity
          : count(o.starveAfterMs, `${at}.starveAfterMs`, 1),
      ...(o.shedAtMs === undefined ? {} : { shedAtMs: count(o.shedAtMs, `${at}.shedAtMs`, 1) }),
    };
  });
}

function sheddingSpec(raw: unknown, where: string): SheddingConfig {
  const o = object(raw, where, SHEDDING_KEYS);
  if (o.sloMs === undefined) throw new FlowConfigError(`${where}.sloMs is required: the TTFT bound, ms`);
  return {
    sloMs: count(o.sloMs, `${where}.sloMs`, 1),
    typicalTokens: o.typicalTokens === undefined ? 1024 : count(o.typicalTokens, `${where}.typicalTokens`, 1),
    intervalMs: o.intervalMs === undefined ? 20 : count(o.intervalMs, `${where}.intervalMs`, 0),
  };
}

function tenantSpec(raw: unknown, where: string): FlowTenant {
  const o = object(raw, where, TENANT_KEYS);
  const out: FlowTenant = { weight: o.weight === undefined ? 1 : positive(o.weight, `${where}.weight`) };
  for (const key of ['rpm', 'rpmBurst', 'tpm', 'tpmBurst'] as const)
    if (o[key] !== undefined) out[key] = positive(o[key], `${where}.${key}`);
  if (out.rpmBurst !== undefined && out.rpm === undefined)
    throw new FlowConfigError(`${where}.rpmBurst needs ${where}.rpm`);
  if (out.tpmBurst !== undefined && out.tpm === undefined)
    throw new FlowConfigError(`${where}.tpmBurst needs ${where}.tpm`);
  return out;
}

function object(raw: unknown, where: string, keys?: readonly string[]): Record<string, unknown> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new FlowConfigError(`${where} must be an object, got ${show(raw)}`);
  if (keys !== undefined)
    for (const key of Object.keys(raw))
      if (!keys.includes(key)) throw new FlowConfigError(`${where}: unknown key "${key}"; known: ${keys.join(', ')}`);
  return raw as Record<string, unknown>;
}

function name(raw: unknown, where: string): string {
  if (typeof raw !== 'string' || !NAME.test(raw))
    throw new FlowConfigError(`${where} must be 1 to 64 letters, digits or _.:-, got ${show(raw)}`);
  return raw;
}

function header(raw: unknown, where: string): string {
  if (typeof raw !== 'string' || !HEADER.test(raw.toLowerCase()))
    throw new FlowConfigError(`${where} must be a header name (letters, digits, -), got ${show(raw)}`);
  return raw.toLowerCase();
}

function bool(raw: unknown, where: string): boolean {
  if (typeof raw !== 'boolean') throw new FlowConfigError(`${where} must be true or false, got ${show(raw)}`);
  return raw;
}

function positive(raw: unknown, where: string): number {
  if (typeof raw !== 'number' || !Number.isFinite(raw) || raw <= 0)
    throw new FlowConfigError(`${where} must be a number > 0, got ${show(raw)}`);
  return raw;
}

function fraction(raw: unknown, where: string, max: number): number {
  if (typeof raw !== 'number' || !Number.isFinite(raw) || raw < 0 || raw > max)
    throw new FlowConfigError(`${where} must be a number from 0 to ${max}, got ${show(raw)}`);
  return raw;
}

function count(raw: unknown, where: string, min: number): number {
  if (typeof raw !== 'number' || !Number.isSafeInteger(raw) || raw < min)
    throw new FlowConfigError(`${where} must be an integer >= ${min}, got ${show(raw)}`);
  return raw;
}

function show(raw: unknown): string {
  const text = JSON.stringify(raw) ?? String(raw);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
