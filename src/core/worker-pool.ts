/**
 * Piscina pools that are never destroyed under a worker still loading its module.
 *
 * Hazard (Node 20): terminating a worker thread while it loads its ES module through require(), as
 * Piscina's workers load theirs, aborts the whole process (a failed assertion in
 * `ModuleWrap::CreateRequiredModuleFacade`, exit 134, nothing the caller can catch). It happened
 * when a pool was closed right after a first task failed: `TokenizerPool.open` on a tokenizer
 * directory without `tokenizer.json`, 4 threads, about one run in three; a sweep whose bad trace
 * failed its first cell.
 *
 * So a pool is made by newWorkerPool(), which watches each worker it starts for Piscina's ready
 * message (posted once the worker's module is loaded), and closed by destroyWorkerPool(), which
 * waits for those (each worker ready or exited, at most LOAD_WAIT_MS) before Piscina terminates
 * them. Every pool here starts all its threads at construction (minThreads = maxThreads); a worker
 * Piscina starts later (replacing one that died) is not watched.
 */
import { Piscina } from 'piscina';

/** What a Piscina worker posts its pool once its module is loaded (piscina's `common.READY`). */
const PISCINA_READY = '_WORKER_READY';
/** The longest a close waits for a loading worker before terminating it regardless. */
const LOAD_WAIT_MS = 30_000;

const loads = new WeakMap<Piscina, Promise<void>>();

function isReadyMessage(message: unknown): boolean {
  return typeof message === 'object' && message !== null && PISCINA_READY in message;
}

/** A Piscina pool whose workers' loading is watched (destroy it with destroyWorkerPool). */
export function newWorkerPool(options: ConstructorParameters<typeof Piscina>[0]): Piscina {
  const pool = new Piscina(options);
  // The workers of minThreads exist now (Piscina starts them in its constructor), and their ready
  // messages arrive on a later turn of the event loop: listening now misses none.
  const ready = pool.threads.map(
    (worker) =>
      new Promise<void>((resolve) => {
        const onMessage = (message: unknown): void => {
          if (!isReadyMessage(message)) return;
          worker.off('message', onMessage);
          resolve();
        };
        worker.on('message', onMessage);
        worker.once('exit', () => resolve());
      }),
  );
  loads.set(
    pool,
    Promise.all(ready).then(() => {}),
  );
  return pool;
}

/** Resolves once every worker newWorkerPool saw start has loaded its module or exited. */
export function workersLoaded(pool: Piscina): Promise<void> {
  return loads.get(pool) ?? Promise.resolve();
}

/** Destroys `pool` once its workers have loaded (workersLoaded), or after LOAD_WAIT_MS. */
export async function destroyWorkerPool(pool: Piscina): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, LOAD_WAIT_MS);
  });
  await Promise.race([workersLoaded(pool), waited]);
  clearTimeout(timer);
  await pool.destroy();
}
