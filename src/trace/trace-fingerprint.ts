/**
 * A short digest of a trace's requests as read (session, turn, lengths and block ids), so two
 * record files can tell whether they ran the same trace: `analyze compare` refuses runs of
 * different traces. It digests what the runs saw, not the file's bytes, so a gzip copy, a
 * format conversion or a reordered file of the same requests fingerprint alike.
 */
import { createHash, type Hash } from 'node:crypto';

import type { TraceRequest } from './types.js';

export class TraceFingerprint {
  private readonly hash: Hash = createHash('sha256');
  private parts: string[] = [];
  requests = 0;

  add(request: TraceRequest): void {
    const ids = request.hashIds;
    this.parts.push(
      `${request.session}\t${request.turn}\t${request.inputLength}\t${request.outputLength}\t${ids.length}\t${ids[0] ?? ''}\t${ids[ids.length - 1] ?? ''}\n`,
    );
    this.requests++;
    if (this.parts.length >= 1024) this.flush();
  }

  /** `sha256:` and the first 16 hex digits, with the request count: "sha256:0123…:3993". */
  digest(): string {
    this.flush();
    return `sha256:${this.hash.copy().digest('hex').slice(0, 16)}:${this.requests}`;
  }

  private flush(): void {
    if (this.parts.length === 0) return;
    this.hash.update(this.parts.join(''));
    this.parts = [];
  }
}

/** Passes `source` through unchanged, digesting each request on the way. */
export async function* fingerprinted<T extends TraceRequest>(
  source: AsyncIterable<T> | Iterable<T>,
  fingerprint: TraceFingerprint,
): AsyncGenerator<T> {
  for await (const request of source) {
    fingerprint.add(request);
    yield request;
  }
}
