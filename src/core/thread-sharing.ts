/**
 * Sharing one native core across the threads of a process (docs/scale-out.md): the sharing
 * router publishes its core (Router.share()) and its names (Router.mirror()); a router made with
 * `options.attach` routes on that core and adopts the names (Router.adoptMirror()), so slots and
 * model groups mean the same on every thread.
 *
 * Invariants:
 * - adopting touches nothing in the core: open tickets stay valid;
 * - the core refuses a route whose explain buffers cannot hold every slot, and the sharer may add
 *   instances before an attached router adopts them: an attached router keeps room for twice the
 *   core's slots (at least MIN_ATTACHED_SLOTS).
 */
import type { ModelGroups } from './model-groups.js';
import type { ResolvedPolicy } from './types.js';

/** What a router attached to a shared core takes from the sharing router (mirror(), adoptMirror()). */
export interface RouterMirror {
  instances: Array<{ id: string; slot: number; models: readonly string[] | null }>;
  groups: Array<[string, number]>;
  policy: ResolvedPolicy;
}

/** Explain-buffer slots an attached router keeps at least (see adoptMirror). */
const MIN_ATTACHED_SLOTS = 256;

/** The router's names by slot, and its model groups. */
export interface InstanceNames {
  names: Array<string | undefined>;
  slots: Map<string, number>;
  groups: ModelGroups;
}

export function mirrorOf(own: InstanceNames, policy: ResolvedPolicy): RouterMirror {
  const instances: RouterMirror['instances'] = [];
  own.names.forEach((id, slot) => {
    if (id !== undefined) instances.push({ id, slot, models: own.groups.slots[slot] ?? null });
  });
  return { instances, groups: own.groups.entries(), policy };
}

/** Names slots and groups as `mirror` does; returns the explain-buffer slots to keep at least. */
export function adoptNames(own: InstanceNames, mirror: RouterMirror, coreSlots: number): number {
  own.names.length = 0;
  own.slots.clear();
  const bySlot: Array<readonly string[] | undefined> = [];
  for (const { id, slot, models } of mirror.instances) {
    own.names[slot] = id;
    own.slots.set(id, slot);
    bySlot[slot] = models ?? undefined;
  }
  own.groups.adopt(mirror.groups, bySlot);
  return Math.max(MIN_ATTACHED_SLOTS, 2 * coreSlots);
}

/** The shared core's lock counters as Router.lockStats() reports them. */
export function lockStatsOf(out: Float64Array): { previousOp: number; thisOp: number; ops: number; contended: number } {
  return { previousOp: out[0]!, thisOp: out[1]!, ops: out[2]!, contended: out[3]! };
}
