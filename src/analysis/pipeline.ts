/**
 * The two stages of characterization behind one interface, in this thread or on Piscina
 * workers. The reader (this thread) sends id batches to the trie stage; the trie stage
 * sends path batches to the session shards; at the end the shards' per-node session counts
 * are merged and handed back to the trie stage for shared depths. Both forms deliver the same
 * batches in the same order to the same stage code, so their results are identical.
 *
 * Threaded: one Piscina task for the trie stage and one per shard, connected by
 * MessagePorts (the trie stage talks to the shards directly). Reading and parsing, the trie
 * walk and the session shards run in parallel.
 */
import { availableParallelism } from 'node:os';
import { MessageChannel } from 'node:worker_threads';

import { AckedPort } from './acked-port.js';
import { destroyWorkerPool, newWorkerPool } from '../core/worker-pool.js';
import type { SessionShardTask, TrieStageTask } from './characterize-worker.js';
import { SessionShard, type ShardResult } from './session-shard.js';
import { mergeNodeSessions, TrieStage, type IdBatch, type TrieResult } from './trie-stage.js';

export interface Pipeline {
  /** Hands a batch to the trie stage; resolves when the sender may go on. */
  send(batch: IdBatch): Promise<void> | void;
  /** Ends the input; returns the trie stage's and every shard's result. */
  finish(minSessions: number): Promise<{ trie: TrieResult; shards: ShardResult[] }>;
  /** Releases threads; safe after a failure, and more than once. */
  close(): Promise<void>;
}

/** Session shards (one thread each) by default: one per core beyond the first. */
export function defaultWorkers(): number {
  return Math.max(1, availableParallelism() - 1);
}

/** `native`: the trie stage walks the addon's trie (else the TypeScript reference). */
export function inlinePipeline(shardCount: number, native: boolean): Pipeline {
  const shards = Array.from({ length: shardCount }, () => new SessionShard());
  const stage = new TrieStage(
    shards.map((shard) => (batch) => shard.add(batch)),
    native,
  );
  return {
    send: (batch) => stage.add(batch),
    async finish(minSessions) {
      await stage.flush();
      const results = shards.map((shard) => shard.result());
      const trie = stage.finish(mergeNodeSessions(results.map((r) => r.nodeSessions)), minSessions);
      return { trie, shards: results };
    },
    close: async () => {},
  };
}

/**
 * The compiled worker beside this module. Run from the TypeScript sources (tests), this module
 * is a .ts file and worker threads cannot load its .ts sibling, so it uses the build in dist/.
 */
const WORKER_URL = import.meta.url.endsWith('.ts')
  ? new URL('../../dist/analysis/characterize-worker.js', import.meta.url).href
  : new URL('./characterize-worker.js', import.meta.url).href;

/** `shardCount` session shards on a thread each, and the trie stage on one more (`native`: as inlinePipeline). */
export function threadedPipeline(shardCount: number, native: boolean): Pipeline {
  const threads = shardCount + 1;
  // Every task lives for the whole run, so there must be a thread for each: a queued task
  // would never start while the others wait on it.
  const pool = newWorkerPool({ filename: WORKER_URL, minThreads: threads, maxThreads: threads });
  const shardChannels = Array.from({ length: shardCount }, () => new MessageChannel());
  const shardTasks: Promise<ShardResult>[] = shardChannels.map(({ port2 }) =>
    pool.run({ port: port2 } satisfies SessionShardTask, { name: 'sessionShard', transferList: [port2] }),
  );
  const { port1, port2 } = new MessageChannel();
  const shardPorts = shardChannels.map(({ port1: toShard }) => toShard);
  const trieTask: Promise<TrieResult> = pool.run({ port: port2, shardPorts, native } satisfies TrieStageTask, {
    name: 'trieStage',
    transferList: [port2, ...shardPorts],
  });
  const toTrie = new AckedPort(port1);
  for (const task of [trieTask, ...shardTasks]) task.catch((error: unknown) => toTrie.fail(error));
  let closed = false;
  const pipeline: Pipeline = {
    send: (batch) => toTrie.send({ batch }, [batch.buffer as ArrayBuffer]),
    async finish(minSessions) {
      toTrie.post('end');
      const shards = await Promise.all(shardTasks);
      const nodeSessions = mergeNodeSessions(shards.map((r) => r.nodeSessions));
      toTrie.post({ nodeSessions, minSessions }, [nodeSessions.buffer as ArrayBuffer]);
      return { trie: await trieTask, shards };
    },
    async close() {
      if (closed) return;
      closed = true;
      toTrie.close();
      await destroyWorkerPool(pool);
    },
  };
  return pipeline;
}
