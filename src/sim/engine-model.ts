/**
 * One vLLM V1 engine in virtual time: continuous batching, chunked prefill, automatic prefix
 * caching over a bounded block pool, and recompute preemption on KV exhaustion.
 *
 * The caller drives time: `submit` queues a request, `step(now)` runs one scheduler step that
 * starts at `now` and returns when it ends and what it produced. Requests submitted while a
 * step runs join the next one, as in vLLM.
 *
 * A step (the scheduler model): every running request that has finished its prefill
 * decodes one token; prefill chunks take up to `maxBatchedTokens` more tokens, running requests
 * first (oldest first), then waiting ones while blocks and the running cap allow. A request's
 * last prefill chunk produces its first token; each later step produces one more.
 *
 * Memory: a sequence holds ceil(computed / blockSize) blocks. Admission reuses the longest run
 * of cached full prompt blocks (leaving at least one token to compute, as vLLM does). When a
 * running request needs a block and none can be had, the newest running request is preempted:
 * its blocks are released (full prompt blocks stay cached) and it re-queues at the front of the
 * waiting queue to recompute its prompt and the tokens it had generated.
 *
 * P→D KV transfer (vLLM's disaggregated prefill, docs/offload.md), two request flags:
 * - `holdBlocks` (the prefill instance's side, vLLM's do_remote_decode): at its finish the request
 *   keeps its blocks referenced, out of the running and waiting queues, until `releaseHeld`
 *   (vLLM delays freeing them until the decode instance has read them).
 * - `transferred` (the decode instance's side, do_remote_prefill): the request's KV arrived by
 *   transfer. At admission it takes this engine's cached prefix as usual, gets blocks for the
 *   whole prompt, names the prompt's full blocks (so they are cached here from then on) and
 *   counts the rest of the prompt but its last token as `transferredTokens`. It enters as a
 *   decode: its first token comes from the step that admits it, one token of the step's budget
 *   priced as a decode (vLLM recomputes the last prompt token in a step batched with the
 *   decodes; no prefill chunk, so no prefill step overhead). Waiting, it counts as decoding in
 *   `state()`: its prefill is done. After a preemption it recomputes locally like any request.
 */
import type { ObservedState } from '../core/types.js';
import { BlockPool } from './block-pool.js';
import { capacityBlocks, decodeStepsMsAtLeast, stepMs, type EnginePreset, type PrefillChunk } from './engine-preset.js';

/** A sequence's block that carries no hash id (partial, generated, or a duplicate). */
const ANONYMOUS = -1;
const NO_CHUNKS: readonly PrefillChunk[] = [];

export interface EngineRequest {
  id: number;
  /** Block ids of the prompt, one per blockSize tokens. */
  hashIds: readonly number[];
  /**
   * The prompt's token ids, when the request has them: block i holds tokens
   * [i × blockSize, (i + 1) × blockSize). Only KV cache events read them (docs/kv-events.md).
   */
  tokens?: Uint32Array;
  inputLength: number;
  outputLength: number;
  /** Prefill for a remote decode: keep the blocks at the finish until `releaseHeld` (see header). */
  holdBlocks?: boolean;
  /** Decode of a remote prefill: the prompt's KV arrived by transfer (see header). */
  transferred?: boolean;
}

/** A request inside the engine; the fields after `request` are its progress. */
export interface Sequence {
  request: EngineRequest;
  submittedAt: number;
  /** Tokens to compute before decoding: the prompt, plus generated tokens after a preemption. */
  prefillTarget: number;
  computed: number;
  generated: number;
  /** Prompt tokens served from this engine's prefix cache at first admission (undefined until admitted). */
  cachedTokens: number | undefined;
  /** A transferred request: prompt tokens it held at admission from the transfer (else 0). */
  transferredTokens: number;
  /** A transferred request not admitted yet. */
  awaitingAdmission: boolean;
  firstTokenAt: number | undefined;
  finishedAt: number | undefined;
  preemptions: number;
  /** True once any step decoded this request while also running a prefill chunk. */
  decodeOverlappedPrefill: boolean;
  /** Per block: the pool handle of a named block, or -1 for an anonymous one. */
  blocks: number[];
  /** Leading blocks already given their hash id (or left anonymous for good). */
  named: number;
}

export interface StepOutcome {
  start: number;
  end: number;
  prefillTokens: number;
  decodes: number;
  firstTokens: Sequence[];
  finished: Sequence[];
  preempted: Sequence[];
}

/** Live engine state: exactly the fields a router observes (`Router.setObservedState`). */
export type EngineState = Required<Omit<ObservedState, 'timestampMs'>>;

export interface EngineCounters {
  steps: number;
  preemptions: number;
  promptTokens: number;
  cachedTokens: number;
  /** vLLM's prefix_cache_queries / prefix_cache_hits, in tokens. */
  prefixQueries: number;
  prefixHits: number;
}

export interface EngineOptions {
  preset: EnginePreset;
  /** Tokens per KV block; the requests' hash ids must use the same size. */
  blockSize: number;
  /** Overrides the preset's KV capacity. */
  capacityBlocks?: number;
}

export class EngineModel {
  readonly pool: BlockPool<Sequence>;
  readonly blockSize: number;
  private readonly preset: EnginePreset;
  private readonly running: Sequence[] = [];
  private readonly waiting: Sequence[] = [];
  /** Finished `holdBlocks` requests whose blocks are still referenced (see releaseHeld). */
  private readonly held = new Set<Sequence>();
  /** The pool version at which the waiting head was last refused (-1: not refused). */
  private refusedAtVersion = -1;
  readonly counters: EngineCounters = {
    steps: 0,
    preemptions: 0,
    promptTokens: 0,
    cachedTokens: 0,
    prefixQueries: 0,
    prefixHits: 0,
  };

  constructor(options: EngineOptions) {
    this.preset = options.preset;
    this.blockSize = options.blockSize;
    if (!(Number.isSafeInteger(this.blockSize) && this.blockSize > 0))
      throw new RangeError(`blockSize must be a positive integer, got ${this.blockSize}`);
    this.pool = new BlockPool<Sequence>(options.capacityBlocks ?? capacityBlocks(this.preset, this.blockSize));
  }

  get idle(): boolean {
    return this.running.length === 0 && this.waiting.length === 0;
  }

  /** The most tokens (prompt + output) one request can hold: the whole pool. */
  get maxRequestTokens(): number {
    return this.pool.capacity * this.blockSize;
  }

  /**
   * Queues a request. One that could not fit even in an empty pool would wait forever, so it is
   * refused here (vLLM refuses it up front too: max_model_len never exceeds the KV cache).
   */
  submit(request: EngineRequest, now: number): Sequence {
    const tokens = request.inputLength + Math.max(1, request.outputLength);
    if (tokens > this.maxRequestTokens)
      throw new RangeError(
        `request ${request.id} needs ${tokens} tokens of KV cache; the engine holds ${this.maxRequestTokens}`,
      );
    const sequence: Sequence = {
      request,
      submittedAt: now,
      prefillTarget: request.inputLength,
      computed: 0,
      generated: 0,
      cachedTokens: undefined,
      transferredTokens: 0,
      awaitingAdmission: request.transferred === true,
      firstTokenAt: undefined,
      finishedAt: undefined,
      preemptions: 0,
      decodeOverlappedPrefill: false,
      blocks: [],
      named: 0,
    };
    this.waiting.push(sequence);
    return sequence;
  }

  /** Removes a request wherever it is (held too), releasing its blocks. False when it is not here. */
  abort(sequence: Sequence): boolean {
    if (this.releaseHeld(sequence)) return true;
    for (const queue of [this.running, this.waiting]) {
      const at = queue.indexOf(sequence);
      if (at < 0) continue;
      queue.splice(at, 1);
      this.releaseBlocks(sequence);
      return true;
    }
    return false;
  }

  /**
   * Releases the blocks a finished `holdBlocks` request kept (its full prompt blocks stay cached).
   * False when it holds none: not finished yet, not a holding request, or already released.
   */
  releaseHeld(sequence: Sequence): boolean {
    if (!this.held.delete(sequence)) return false;
    this.releaseBlocks(sequence);
    return true;
  }

  /** Finished requests still holding their blocks for a transfer. */
  get heldRequests(): number {
    return this.held.size;
  }

  /**
   * Prompt tokens of `request` this engine's prefix cache lacks now: what a transfer of its KV
   * from a prefill instance must bring (the prompt less the cached run of its full blocks).
   */
  lackedTokens(request: Pick<EngineRequest, 'hashIds' | 'inputLength'>): number {
    const full = Math.min(Math.floor(request.inputLength / this.blockSize), request.hashIds.length);
    return request.inputLength - this.pool.matchPrefix(request.hashIds, full) * this.blockSize;
  }

  state(): EngineState {
    let pending = 0;
    let maxRemaining = 0;
    let decodeBatch = 0;
    for (const queue of [this.running, this.waiting]) {
      for (const sequence of queue) {
        const remaining = sequence.awaitingAdmission ? 0 : sequence.prefillTarget - sequence.computed;
        if (remaining > 0) {
          pending += remaining;
          maxRemaining = Math.max(maxRemaining, remaining);
        } else {
          decodeBatch++;
        }
      }
    }
    return {
      running: this.running.length,
      waiting: this.waiting.length,
      kvBlocksUsed: this.pool.referenced,
      kvBlocksTotal: this.pool.capacity,
      pendingPrefillTokens: pending,
      maxPrefillRemaining: maxRemaining,
      decodeBatch,
    };
  }

  /**
   * Runs one scheduler step starting at `now` (seconds); undefined when there is nothing to do,
   * or nothing can run: no request running and the waiting head short of blocks, which only
   * held blocks can cause (releaseHeld frees them; the caller steps again then).
   */
  step(now: number): StepOutcome | undefined {
    if (this.idle) return undefined;
    const preempted: Sequence[] = [];
    const decodes: Sequence[] = [];
    const chunks: Array<{ sequence: Sequence } & PrefillChunk> = [];
    let budget = this.preset.maxBatchedTokens;

    // Running requests, oldest first. Preemption takes the newest, which is scheduled last.
    for (let i = 0; i < this.running.length; i++) {
      const sequence = this.running[i]!;
      const remaining = sequence.prefillTarget - sequence.computed;
      const tokens = remaining > 0 ? Math.min(remaining, budget) : 1;
      if (tokens === 0) continue;
      if (!this.reserve(sequence, tokens, preempted)) break; // it was preempted itself
      budget -= tokens; // a decode's token counts against the budget too, as in vLLM
      if (remaining > 0) chunks.push({ sequence, tokens, context: sequence.computed });
      else decodes.push(sequence);
    }
    // Waiting requests, in order, while nothing was preempted this step (as vLLM).
    while (preempted.length === 0 && budget > 0 && this.waiting.length > 0) {
      if (this.running.length >= this.preset.maxRunning) break;
      // A head refused for want of blocks stays refused until the pool frees or names a block.
      if (this.refusedAtVersion === this.pool.version) break;
      const sequence = this.waiting[0]!;
      if (sequence.awaitingAdmission) {
        if (!this.admitTransferred(sequence)) break;
        this.waiting.shift();
        this.running.push(sequence);
        decodes.push(sequence);
        budget -= 1;
        continue;
      }
      this.acquireCachedPrefix(sequence);
      const tokens = Math.min(sequence.prefillTarget - sequence.computed, budget);
      if (!this.pool.allocate(this.blocksFor(sequence.computed + tokens) - sequence.blocks.length)) {
        // Give back the cached blocks it took; it is retried once the pool changes.
        this.releaseBlocks(sequence);
        sequence.computed = 0;
        this.refusedAtVersion = this.pool.version;
        break;
      }
      this.countAdmission(sequence);
      this.addAnonymous(sequence, this.blocksFor(sequence.computed + tokens));
      this.waiting.shift();
      this.running.push(sequence);
      chunks.push({ sequence, tokens, context: sequence.computed });
      budget -= tokens;
    }

    if (chunks.length === 0 && decodes.length === 0 && preempted.length === 0) return undefined;
    let decodeContext = 0;
    for (const sequence of decodes) decodeContext += sequence.computed;
    const end = now + stepMs(this.preset, chunks, decodes.length, decodeContext) / 1000;
    this.counters.steps++;
    const firstTokens: Sequence[] = [];
    const finished: Sequence[] = [];
    for (const { sequence, tokens } of chunks) {
      sequence.computed += tokens;
      this.registerFullBlocks(sequence);
      if (sequence.computed === sequence.prefillTarget) this.emit(sequence, end, firstTokens, finished);
    }
    for (const sequence of decodes) {
      if (chunks.length > 0) sequence.decodeOverlappedPrefill = true;
      sequence.computed += 1;
      sequence.prefillTarget += 1; // the decoded token is part of the sequence now
      this.emit(sequence, end, firstTokens, finished);
    }
    for (const sequence of finished) {
      this.running.splice(this.running.indexOf(sequence), 1);
      if (sequence.request.holdBlocks === true) this.held.add(sequence);
      else this.releaseBlocks(sequence);
    }
    const prefillTokens = chunks.reduce((sum, chunk) => sum + chunk.tokens, 0);
    return { start: now, end, prefillTokens, decodes: decodes.length, firstTokens, finished, preempted };
  }

  /**
   * Runs, at once, the decode-only steps from `now` that step() would run next when nothing else
   * happens: every running request is decoding, none is waiting, no step finishes a request, and
   * each step ends before `limit`. Their blocks are taken in one allocation (the same blocks, in
   * the same eviction order, as one per step); if the pool cannot give them, nothing is run.
   * Returns the end of the last step run, or `now` when none was. Times are bit-identical to
   * stepping one by one.
   */
  fastForward(now: number, limit: number): number {
    if (this.waiting.length > 0 || this.running.length === 0) return now;
    let stepsLeft = Infinity;
    let context = 0;
    for (const sequence of this.running) {
      if (sequence.prefillTarget > sequence.computed) return now;
      // The step producing a request's last token finishes it, so it is not run here.
      stepsLeft = Math.min(stepsLeft, Math.max(1, sequence.request.outputLength) - sequence.generated - 1);
      context += sequence.computed;
    }
    const batch = this.running.length;
    let steps = 0;
    let end = now;
    for (; steps < stepsLeft; steps++) {
      const next = end + stepMs(this.preset, NO_CHUNKS, batch, context + steps * batch) / 1000;
      if (next >= limit) break;
      end = next;
    }
    if (steps === 0) return now;
    let needed = 0;
    for (const sequence of this.running) needed += this.blocksFor(sequence.computed + steps) - sequence.blocks.length;
    if (!this.pool.allocate(needed)) return now;
    for (const sequence of this.running) {
      this.addAnonymous(sequence, this.blocksFor(sequence.computed + steps));
      sequence.computed += steps;
      sequence.prefillTarget += steps;
      sequence.generated += steps;
    }
    this.counters.steps += steps;
    return end;
  }

  /**
   * The earliest time, stepping from `from`, at which this engine can next report a first token,
   * a finish or a preemption if nothing is submitted meanwhile: when it is only decoding and has
   * the blocks for it, the end of the step that finishes its first request; Infinity when idle;
   * otherwise `from`. A lower bound the simulator uses to let other engines run ahead.
   */
  quietUntil(from: number): number {
    if (this.idle) return Infinity;
    if (this.waiting.length > 0) return from;
    let steps = Infinity;
    let context = 0;
    let needed = 0;
    for (const sequence of this.running) {
      if (sequence.prefillTarget > sequence.computed) return from;
      steps = Math.min(steps, Math.max(1, sequence.request.outputLength) - sequence.generated);
      context += sequence.computed;
    }
    for (const sequence of this.running) needed += this.blocksFor(sequence.computed + steps) - sequence.blocks.length;
    if (needed > this.pool.available) return from;
    return from + decodeStepsMsAtLeast(this.preset, this.running.length, context, steps) / 1000;
  }

  /** One more generated token; the request finishes at its output length (at least one token). */
  private emit(sequence: Sequence, end: number, firstTokens: Sequence[], finished: Sequence[]): void {
    sequence.generated++;
    if (sequence.firstTokenAt === undefined) {
      sequence.firstTokenAt = end;
      firstTokens.push(sequence);
    }
    if (sequence.generated >= Math.max(1, sequence.request.outputLength)) {
      sequence.finishedAt = end;
      finished.push(sequence);
    }
  }

  private blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSize);
  }

  /**
   * Blocks for `tokens` more tokens of a running request, preempting the newest running
   * requests while the pool is short. False when `sequence` itself had to go.
   */
  private reserve(sequence: Sequence, tokens: number, preempted: Sequence[]): boolean {
    const needed = this.blocksFor(sequence.computed + tokens) - sequence.blocks.length;
    while (!this.pool.allocate(needed)) {
      const victim = this.running[this.running.length - 1]!;
      this.preempt(victim);
      preempted.push(victim);
      if (victim === sequence) return false;
    }
    this.addAnonymous(sequence, sequence.blocks.length + needed);
    return true;
  }

  private preempt(sequence: Sequence): void {
    this.running.pop();
    this.releaseBlocks(sequence);
    sequence.computed = 0;
    sequence.preemptions++;
    this.counters.preemptions++;
    this.waiting.unshift(sequence);
  }

  /** At admission: take the longest run of cached full prompt blocks as computed. */
  private acquireCachedPrefix(sequence: Sequence): void {
    const { request } = sequence;
    const fullPromptBlocks = Math.floor(request.inputLength / this.blockSize);
    // At least one token is always computed (vLLM recomputes the last one of a full hit).
    const limit = Math.min(fullPromptBlocks, Math.floor((sequence.prefillTarget - 1) / this.blockSize));
    const matched = this.pool.acquirePrefix(request.hashIds, Math.min(limit, request.hashIds.length), sequence.blocks);
    sequence.computed = matched * this.blockSize;
  }

  /**
   * Admits a transferred request (see the header): its cached prefix, blocks for the whole
   * prompt, the prompt's full blocks named, computed up to the last prompt token, which the
   * admitting step decodes. False, taking nothing, when the pool cannot give the blocks.
   */
  private admitTransferred(sequence: Sequence): boolean {
    const { inputLength, hashIds } = sequence.request;
    this.acquireCachedPrefix(sequence);
    if (!this.pool.allocate(this.blocksFor(inputLength) - sequence.blocks.length)) {
      this.releaseBlocks(sequence);
      sequence.computed = 0;
      this.refusedAtVersion = this.pool.version;
      return false;
    }
    this.countAdmission(sequence);
    this.addAnonymous(sequence, this.blocksFor(inputLength));
    sequence.transferredTokens = inputLength - 1 - sequence.computed;
    sequence.computed = inputLength - 1;
    sequence.prefillTarget = inputLength - 1; // the admitting step's decode adds the last token
    sequence.awaitingAdmission = false;
    const full = Math.min(Math.floor(inputLength / this.blockSize), hashIds.length);
    for (let i = sequence.named; i < full; i++) {
      if (sequence.blocks[i] === ANONYMOUS) sequence.blocks[i] = this.pool.register(hashIds[i]!, sequence, i);
    }
    sequence.named = Math.max(sequence.named, full);
    return true;
  }

  /** Prefix-cache accounting of an admission (a re-admission after preemption queries again). */
  private countAdmission(sequence: Sequence): void {
    const prompt = sequence.request.inputLength;
    if (sequence.cachedTokens === undefined) {
      sequence.cachedTokens = sequence.computed;
      this.counters.promptTokens += prompt;
      this.counters.cachedTokens += sequence.computed;
    }
    this.counters.prefixQueries += sequence.prefillTarget;
    this.counters.prefixHits += sequence.computed;
  }

  private addAnonymous(sequence: Sequence, blocks: number): void {
    while (sequence.blocks.length < blocks) sequence.blocks.push(ANONYMOUS);
  }

  /**
   * Names the prompt blocks that just became full, so later requests can reuse them. A block
   * whose id another block already holds stays anonymous for good, as in vLLM.
   */
  private registerFullBlocks(sequence: Sequence): void {
    const { hashIds, inputLength } = sequence.request;
    const full = Math.min(Math.floor(Math.min(sequence.computed, inputLength) / this.blockSize), hashIds.length);
    for (let i = sequence.named; i < full; i++) {
      if (sequence.blocks[i] === ANONYMOUS) sequence.blocks[i] = this.pool.register(hashIds[i]!, sequence, i);
    }
    sequence.named = Math.max(sequence.named, full);
  }

  private releaseBlocks(sequence: Sequence): void {
    this.pool.releaseAll(sequence.blocks);
    sequence.blocks = [];
    sequence.named = 0;
  }
}
