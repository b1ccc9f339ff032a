/**
 * `trace transform --tenants SPEC` (docs/flow-control.md "In the simulator"): assigns each session
 * to a tenant, and optionally a priority class, so a flow-control experiment can run any trace.
 * SPEC is `NAME=SHARE[:CLASS],…`: each session goes to a tenant with probability SHARE ÷ the sum
 * of shares, drawn from a seeded hash of its id (so a session's turns stay together and the
 * draw needs no memory), and each tenant's request rate is its share of the trace's.
 */
import { invalidValue } from '../core/errors.js';

export interface TenantShare {
  name: string;
  share: number;
  /** The class its requests carry (`priority`); absent: the default class. */
  priority?: string;
}

const NAME = /^[A-Za-z0-9_.:@/-]{1,128}$/;
const CLASS = /^[A-Za-z0-9_.:-]{1,64}$/;

export function parseTenantSpec(spec: string): TenantShare[] {
  const entries = spec.split(',').map((e) => e.trim());
  const out: TenantShare[] = [];
  for (const entry of entries) {
    const match = /^([^=]+)=([^:]+)(?::(.+))?$/.exec(entry);
    if (match === null) throw invalidValue('tenants', 'NAME=SHARE[:CLASS],… (e.g. noisy=10:low,quiet=1)', entry);
    const [, name, share, priority] = match as unknown as [string, string, string, string | undefined];
    if (!NAME.test(name)) throw invalidValue(`tenants ${entry}`, 'a name of 1 to 128 letters, digits or _.:@/-', name);
    const value = Number(share);
    if (!(Number.isFinite(value) && value > 0)) throw invalidValue(`tenants ${entry}`, 'a share > 0', share);
    if (priority !== undefined && !CLASS.test(priority))
      throw invalidValue(`tenants ${entry}`, 'a class of 1 to 64 letters, digits or _.:-', priority);
    if (out.some((t) => t.name === name)) throw invalidValue('tenants', 'each tenant once', name);
    out.push({ name, share: value, ...(priority === undefined ? {} : { priority }) });
  }
  return out;
}

/** The tenant of a session whose seeded draw is `draw` in [0, 1). */
export function tenantFor(tenants: readonly TenantShare[], draw: number): TenantShare {
  const total = tenants.reduce((sum, t) => sum + t.share, 0);
  let cumulative = 0;
  for (const tenant of tenants) {
    cumulative += tenant.share / total;
    if (draw < cumulative) return tenant;
  }
  return tenants[tenants.length - 1]!;
}
