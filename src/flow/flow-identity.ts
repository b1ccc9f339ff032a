/**
 * A request's tenant, class and deadline, from its headers and body (docs/flow-control.md):
 * - tenant: the tenant header (`x-kvroute-tenant`), else the API key's hash (`authorization:
 *   Bearer KEY` or `x-api-key: KEY`) as `key-` + the first 16 hex digits of SHA-256(KEY), else
 *   the default tenant. The key itself is never stored beyond a bounded cache, logged or echoed.
 * - class: the priority header (`x-kvroute-priority`) naming a configured class; else the body's
 *   integer `priority` (vLLM's: lower is handled earlier) through the config's `priorityBands`;
 *   else the default class. The header wins over the body.
 * - deadline: the deadline header (`x-kvroute-deadline-ms`), a whole number of ms.
 * A bad header value is a FlowRequestError naming the header and what it accepts (the proxy's 400).
 * A bad body `priority` never gets here: the request's parse refuses it (request-inputs.ts).
 */
import { createHash } from 'node:crypto';

import { classNames, classRank, type FlowConfig } from './flow-config.js';

export class FlowRequestError extends Error {
  constructor(
    readonly header: string,
    message: string,
  ) {
    super(message);
  }
}

/** The header values flow control reads ('' when absent), copied out of the request's head. */
export interface FlowHeaders {
  tenant: string;
  priority: string;
  deadline: string;
  /** The `authorization` header. */
  authorization: string;
  /** The `x-api-key` header (Anthropic's clients send the key there). */
  apiKey: string;
}

export interface FlowIdentity {
  tenant: string;
  classRank: number;
  /** The client's bound on its wait, ms; undefined: the class's deadline. */
  deadlineMs: number | undefined;
}

const TENANT = /^[A-Za-z0-9_.:@/-]{1,128}$/;
const KEY_CACHE_LIMIT = 4096;
const keyTenants = new Map<string, string>();

/** `bodyPriority`: the body's integer `priority`, undefined when it has none. */
export function identify(headers: FlowHeaders, config: FlowConfig, bodyPriority?: number): FlowIdentity {
  return {
    tenant: tenantOf(headers, config),
    classRank: classOf(headers.priority, bodyPriority, config),
    deadlineMs: deadlineOf(headers.deadline, config),
  };
}

function tenantOf(headers: FlowHeaders, config: FlowConfig): string {
  if (headers.tenant !== '') {
    if (!TENANT.test(headers.tenant))
      throw new FlowRequestError(
        config.tenantHeader,
        `${config.tenantHeader} must be 1 to 128 letters, digits or _.:@/-`,
      );
    return headers.tenant;
  }
  if (config.apiKeyTenants) {
    const key = bearer(headers.authorization) || headers.apiKey;
    if (key !== '') return apiKeyTenant(key);
  }
  return config.defaultTenant;
}

/** The tenant name of an API key: never the key, only its hash. */
export function apiKeyTenant(key: string): string {
  let tenant = keyTenants.get(key);
  if (tenant === undefined) {
    tenant = `key-${createHash('sha256').update(key).digest('hex').slice(0, 16)}`;
    // Bounded: a client cycling keys cannot grow it; the hash is cheap to make again.
    if (keyTenants.size >= KEY_CACHE_LIMIT) keyTenants.clear();
    keyTenants.set(key, tenant);
  }
  return tenant;
}

function bearer(authorization: string): string {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  return match === null ? '' : match[1]!;
}

function classOf(priority: string, bodyPriority: number | undefined, config: FlowConfig): number {
  if (priority === '' && bodyPriority !== undefined) {
    const band = bandClass(bodyPriority, config);
    if (band !== undefined) return band;
  }
  const rank = classRank(config, priority === '' ? config.defaultClass : priority.trim());
  if (rank === undefined)
    throw new FlowRequestError(
      config.priorityHeader,
      `${config.priorityHeader} must be one of ${classNames(config.classes)}, got "${priority.slice(0, 64)}"`,
    );
  return rank;
}

/**
 * The rank of the class whose band holds `priority`; undefined with no bands. resolveFlowConfig
 * guarantees ascending bounds, an open last band and configured class names, so any integer finds
 * one.
 */
function bandClass(priority: number, config: FlowConfig): number | undefined {
  for (const band of config.priorityBands)
    if (band.upTo === undefined || priority <= band.upTo) return classRank(config, band.class);
  return undefined;
}

function deadlineOf(deadline: string, config: FlowConfig): number | undefined {
  if (deadline === '') return undefined;
  if (!/^\d{1,9}$/.test(deadline.trim()) || Number(deadline) < 1)
    throw new FlowRequestError(
      config.deadlineHeader,
      `${config.deadlineHeader} must be a whole number of milliseconds from 1 to 999999999`,
    );
  return Number(deadline);
}
