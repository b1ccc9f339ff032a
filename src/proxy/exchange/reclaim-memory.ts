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
 * The C heap: a collection frees the bodies' ArrayBuffers, but glibc keeps freed pages inside its
 * heaps (only a heap's top goes back on free), so RSS would stay at the burst's peak (measured:
 * 40 brotli bombs left a 128 MiB budget's worth resident). TRIM_AFTER_MS after each collection
 * (V8 frees backing stores after the collection, on its own schedule), the addon's trimHeap()
 * runs malloc_trim(0) on the threadpool. Without the addon (or off glibc) nothing is trimmed.
 *
 * Hazard: Node documents changing V8 flags after start as unsupported in general; `--expose-gc`
 * only installs a function on contexts created afterwards, and every failure here (a runtime that
 * refuses the flag) leaves the proxy as it was: no collection, no throw.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

import { loadNative, nativePath } from '../../core/native.js';

type Collect = (options: { type: 'major'; execution: 'async' }) => Promise<void>;

const RECLAIM_EVERY_MS = 2_000;
/** From a collection's end to the heap trim after it. */
const TRIM_AFTER_MS = 500;
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
  gc({ type: 'major', execution: 'async' }).then(
    () => setTimeout(trimHeap, TRIM_AFTER_MS).unref(),
    () => {},
  );
}

/** Gives the C heap's free pages back (the addon's malloc_trim), when the addon is there. */
function trimHeap(): void {
  if (nativePath() === null) return;
  const addon = loadNative();
  // An addon built before trimHeap existed has none: skip, never throw from a timer.
  if (typeof addon.trimHeap === 'function') addon.trimHeap().catch(() => {});
}
