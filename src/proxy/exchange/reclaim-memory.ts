/**
 * A full garbage collection in the background, on request: how the proxy gives the memory of a
 * burst of huge request bodies back to the system (body-budget.ts). Node has no public call for
 * it, so the first request turns on V8's `--expose-gc` and takes `gc` from a fresh context (as
 * Jest does for `--logHeapUsage`); the process's own global scope is left as it was. V8 runs an
 * `execution: 'async'` collection as a task of its own, so the call returns at once.
 *
 * Rate: at most one collection per RECLAIM_EVERY_MS; a request in between is deferred to the end
 * of that interval (one unref'd timer), so the last bodies of a burst are collected too.
 *
 * Hazard: Node documents changing V8 flags after start as unsupported in general; `--expose-gc`
 * only installs a function on contexts created afterwards, and every failure here (a runtime that
 * refuses the flag) leaves the proxy as it was: no collection, no throw.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

type Collect = (options: { type: 'major'; execution: 'async' }) => Promise<void>;

const RECLAIM_EVERY_MS = 2_000;
let collect: Collect | null | undefined;
let lastAt = -Infinity;
let deferred: NodeJS.Timeout | undefined;

function collector(): Collect | null {
  if (collect !== undefined) return collect;
  try {
    v8.setFlagsFromString('--expose-gc');
    const gc: unknown = vm.runInNewContext('gc');
    collect = typeof gc === 'function' ? (gc as Collect) : null;
  } catch {
    collect = null;
  }
  return collect;
}

/** Asks for a background full collection, now or at the end of the rate interval; false when the runtime has none. */
export function collectGarbageSoon(): boolean {
  const gc = collector();
  if (gc === null) return false;
  const wait = lastAt + RECLAIM_EVERY_MS - performance.now();
  if (wait <= 0) run(gc);
  else if (deferred === undefined) {
    deferred = setTimeout(() => run(gc), wait);
    deferred.unref();
  }
  return true;
}

function run(gc: Collect): void {
  if (deferred !== undefined) clearTimeout(deferred);
  deferred = undefined;
  lastAt = performance.now();
  gc({ type: 'major', execution: 'async' }).catch(() => {});
}
