/**
 * Piscina tasks of the threaded characterization pipeline (see pipeline.ts). Both are
 * long-lived: they take batches over a MessagePort, acknowledge each one after processing it
 * (so senders bound what is in flight), and resolve with their result at the end.
 *
 * Messages are processed strictly in order: a handler that awaits (the trie stage waiting on
 * a busy shard) chains the next message behind it instead of running it concurrently.
 */
import type { MessagePort } from 'node:worker_threads';

import { AckedPort } from './acked-port.js';
import { SessionShard, type ShardResult } from './session-shard.js';
import { TrieStage, type TrieResult } from './trie-stage.js';

export interface SessionShardTask {
  port: MessagePort;
}

export interface TrieStageTask {
  port: MessagePort;
  shardPorts: MessagePort[];
  /** The addon's trie (loaded in this thread) or the TypeScript reference. */
  native: boolean;
}

/** Main → trie stage: id batches, then 'end', then the merged counts. Trie stage → shard: batches, then 'end'. */
export type StageMessage =
  { batch: Float64Array | Uint32Array } | 'end' | { nodeSessions: Uint8Array; minSessions: number };

function serve<T>(
  port: MessagePort,
  handle: (message: StageMessage) => Promise<T | undefined> | T | undefined,
): Promise<T> {
  return new Promise((resolve, reject) => {
    let chain = Promise.resolve();
    port.on('message', (message: StageMessage) => {
      chain = chain
        .then(async () => {
          const result = await handle(message);
          if (result !== undefined) {
            port.close();
            resolve(result);
          }
        })
        .catch((error: unknown) => {
          port.close();
          reject(error);
        });
    });
  });
}

export function sessionShard({ port }: SessionShardTask): Promise<ShardResult> {
  const shard = new SessionShard();
  return serve(port, (message) => {
    if (message === 'end') return shard.result();
    if ('batch' in message) {
      shard.add(message.batch as Uint32Array);
      port.postMessage('ack');
    }
    return undefined;
  });
}

export function trieStage({ port, shardPorts, native }: TrieStageTask): Promise<TrieResult> {
  const shards = shardPorts.map((shardPort) => new AckedPort(shardPort));
  const stage = new TrieStage(
    shards.map((shard) => (batch) => shard.send({ batch }, [batch.buffer as ArrayBuffer])),
    native,
  );
  return serve(port, async (message) => {
    if (message === 'end') {
      await stage.flush();
      for (const shard of shards) shard.post('end');
      return undefined;
    }
    if ('batch' in message) {
      await stage.add(message.batch as Float64Array);
      port.postMessage('ack');
      return undefined;
    }
    for (const shard of shards) shard.close();
    return stage.finish(message.nodeSessions, message.minSessions);
  });
}
