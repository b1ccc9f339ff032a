/**
 * One synthetic agentic session while it is active: the prompt its next turn will send, the
 * hash ids that prompt shares with earlier ones, and when that turn arrives.
 *
 * Prompt model (constants in synth-model.ts):
 * - turn 1: [system prefix] + the class's initial tokens (a root), or the parent's prompt at
 *   the fork turn + task tokens (a sub-agent);
 * - turn k+1 = turn k's prompt + its output + a tool result, of which only the first
 *   (1 - tailRewrite) of turn k's prompt stays a prefix (the harness re-renders the end);
 * - if that would pass the session's compaction trigger, the session compacts instead: the
 *   next prompt is [system prefix] + a fresh summary, sharing nothing else with the past.
 *
 * Hash ids without holding them: the ids of the *full* blocks of the pending prompt's known
 * prefix are kept as runs of consecutive ids (`runs`, flat [first, count, ...]). Each emitted
 * request takes fresh ids for every block past that prefix from the trace-wide counter
 * (`IdCounter`), in one consecutive run; afterwards the request's own full blocks extend
 * `runs`, and its partial last block (if any) is forgotten: the next turn fills that block
 * with more tokens, so it gets a fresh id there. This keeps the chain invariant (equal id at
 * position i ⇒ equal first (i+1)·blockSize tokens) by construction: a known prefix only ever
 * shrinks (rewrite, compaction) or grows by the full blocks of the prompt that issued them, so
 * an id is reused only at its position behind the same ids. Ids are dense (0, 1, 2, ... in
 * issue order). State per session: O(turns since the last compaction).
 *
 * Timing: a turn ends `prefillBase + uncached tokens / prefill rate + output × decode time`
 * after it arrives (the known prefix is assumed cached); the next turn arrives a log-normal
 * tool time later. Sub-agents spawn shortly after their parent's fork turn ends.
 */
import type { TraceRequest } from './types.js';
import { SynthRandom, mixSeed } from './synth-random.js';
import { clampedLogNormal, logNormalTokens, type SessionClass, type SynthModel } from './synth-model.js';
import { SESSION_STREAM } from './synth-plan.js';
import type { SynthOptions } from './synth-options.js';

/** The trace-wide id issuer, plus the system prefix's ids (issued when first used). */
export class IdCounter {
  next = 0;
  private systemFirst = -1;

  constructor(readonly systemBlocks: number) {}

  take(count: number): number {
    const first = this.next;
    this.next += count;
    return first;
  }

  /** First id of the shared system prefix's full blocks (`systemBlocks` of them). */
  systemPrefix(): number {
    if (this.systemFirst < 0) this.systemFirst = this.take(this.systemBlocks);
    return this.systemFirst;
  }
}

export interface SessionContext {
  options: Required<SynthOptions>;
  model: SynthModel;
  ids: IdCounter;
}

/** What the plan fixes about a session (synth-plan.ts). */
export interface SessionTraits {
  planIndex: number;
  turns: number;
  long: boolean;
}

/** What a fork inherits: its parent's prompt at the fork turn and that prompt's full-block runs. */
export interface ForkSeed {
  promptTokens: number;
  runs: number[];
  systemPrefix: boolean;
  /** When the parent's fork turn ended. */
  time: number;
}

export class SynthSession {
  /** Arrival time of the pending turn (seconds, unrounded). */
  time: number;
  /** Turns emitted so far; the pending turn is `turn + 1`. */
  turn = 0;
  /** Assigned when the first turn is emitted, in emission order. */
  name = '';
  /** When the last emitted turn ends (valid after `emit`). */
  endTime = 0;
  private readonly rng: SynthRandom;
  private promptTokens: number;
  private runs: number[];
  private knownBlocks: number;
  private lastOutput = 0;
  private lastPrompt = 0;
  readonly planIndex: number;
  readonly turns: number;
  /** The session's class parameters (SynthModel.short or .long). */
  private readonly kind: SessionClass;
  /** Prompt tokens above which the next prompt is compacted instead (<= contextTokens). */
  private trigger: number;

  private constructor(
    traits: SessionTraits,
    readonly systemPrefix: boolean,
    private readonly ctx: SessionContext,
  ) {
    this.planIndex = traits.planIndex;
    this.turns = traits.turns;
    this.kind = traits.long ? ctx.model.long : ctx.model.short;
    this.rng = new SynthRandom(mixSeed(ctx.options.seed, SESSION_STREAM, traits.planIndex));
    this.trigger = this.drawTrigger();
    this.time = 0;
    this.promptTokens = 0;
    this.runs = [];
    this.knownBlocks = 0;
  }

  static root(ctx: SessionContext, traits: SessionTraits, systemPrefix: boolean, start: number): SynthSession {
    const s = new SynthSession(traits, systemPrefix, ctx);
    s.time = start;
    const room = ctx.options.contextTokens - (systemPrefix ? ctx.options.systemPrefixTokens : 0);
    s.resetPrompt(Math.min(room, logNormalTokens(s.kind.initialTokens, s.rng.normal())));
    return s;
  }

  static fork(ctx: SessionContext, traits: SessionTraits, seed: ForkSeed): SynthSession {
    const s = new SynthSession(traits, seed.systemPrefix, ctx);
    const { spawnSeconds, subagentTaskTokens } = ctx.model;
    s.time = seed.time + s.rng.uniform(spawnSeconds.min, spawnSeconds.max);
    const task = s.rng.int(subagentTaskTokens.min, subagentTaskTokens.max);
    if (seed.promptTokens + task > ctx.options.contextTokens) {
      s.resetPrompt(task); // Nothing fits beside the task: the sub-agent starts from scratch.
    } else {
      s.promptTokens = seed.promptTokens + task;
      s.runs = seed.runs.slice();
      s.knownBlocks = countBlocks(s.runs);
    }
    return s;
  }

  /**
   * What a sub-agent forked at the last emitted turn inherits; valid between `emit` and
   * `advance`. `runs` is borrowed: the fork copies it.
   */
  forkSeed(): ForkSeed {
    return { promptTokens: this.lastPrompt, runs: this.runs, systemPrefix: this.systemPrefix, time: this.endTime };
  }

  /** Emits the pending turn. Call `advance` next (after taking any fork seeds). */
  emit(): TraceRequest {
    const { blockSize } = this.ctx.options;
    const input = this.promptTokens;
    const totalBlocks = Math.ceil(input / blockSize);
    const fresh = totalBlocks - this.knownBlocks; // >= 1: every prompt outgrows its known prefix
    const first = this.ctx.ids.take(fresh);
    const hashIds = new Array<number>(totalBlocks);
    let at = 0;
    for (let r = 0; r < this.runs.length; r += 2) {
      const start = this.runs[r]!;
      const end = start + this.runs[r + 1]!;
      for (let id = start; id < end; id += 1) hashIds[at++] = id;
    }
    for (let k = 0; k < fresh; k += 1) hashIds[at++] = first + k;
    const uncached = input - this.knownBlocks * blockSize;
    const fullFresh = Math.floor(input / blockSize) - this.knownBlocks;
    if (fullFresh > 0) this.pushRun(first, fullFresh);
    const output = logNormalTokens(this.ctx.model.outputTokens, this.rng.normal());
    const { prefillBaseSeconds, prefillTokensPerSecond, decodeSecondsPerToken } = this.ctx.model;
    // Prefill covers the tokens past the known prefix (`uncached`), as if that prefix were cached.
    this.endTime = this.time + prefillBaseSeconds + uncached / prefillTokensPerSecond + output * decodeSecondsPerToken;
    this.turn += 1;
    this.lastPrompt = input;
    this.lastOutput = output;
    return {
      session: this.name,
      turn: this.turn,
      arrival: Math.round(this.time * 1000) / 1000, // monotone in `time`: order is kept
      inputLength: input,
      outputLength: output,
      hashIds,
      blockSize,
    };
  }

  /** Prepares the next turn; false when the session is done. */
  advance(): boolean {
    if (this.turn >= this.turns) return false;
    const { model, options } = this.ctx;
    const tool = logNormalTokens(this.kind.toolTokens, this.rng.normal());
    const next = this.lastPrompt + this.lastOutput + tool;
    if (next > this.trigger) {
      const { min, max } = model.compactionSummary;
      this.resetPrompt(Math.round(this.rng.uniform(min, max) * options.contextTokens));
      this.trigger = this.drawTrigger();
    } else {
      this.promptTokens = next;
      // The harness re-renders the end of the previous prompt: only the rest stays a prefix.
      const { min, max } = model.tailRewrite;
      const rewritten = Math.round(this.rng.uniform(min, max) * this.lastPrompt);
      const floor = this.systemPrefix ? options.systemPrefixTokens : 0;
      this.keepBlocks(Math.floor(Math.max(floor, this.lastPrompt - rewritten) / options.blockSize));
    }
    const seconds = clampedLogNormal(model.toolSeconds, this.rng.normal());
    this.time = this.endTime + seconds;
    return true;
  }

  private drawTrigger(): number {
    const { min, max } = this.ctx.model.compactionTrigger;
    const { contextTokens } = this.ctx.options;
    return Math.min(contextTokens, Math.floor(this.rng.uniform(min, max) * contextTokens));
  }

  /** Next prompt = [system prefix] + `fresh` new tokens; nothing else is known. */
  private resetPrompt(fresh: number): void {
    const { systemPrefixTokens } = this.ctx.options;
    const systemBlocks = this.ctx.ids.systemBlocks;
    this.runs = [];
    this.knownBlocks = 0;
    this.promptTokens = fresh;
    if (this.systemPrefix) {
      this.promptTokens += systemPrefixTokens;
      if (systemBlocks > 0) this.pushRun(this.ctx.ids.systemPrefix(), systemBlocks);
    }
  }

  /** Shortens the known prefix to its first `blocks` blocks (no-op when already shorter). */
  private keepBlocks(blocks: number): void {
    if (blocks >= this.knownBlocks) return;
    let left = blocks;
    let r = 0;
    for (; r < this.runs.length && left > 0; r += 2) {
      const count = this.runs[r + 1]!;
      if (count > left) this.runs[r + 1] = left;
      left -= Math.min(count, left);
    }
    this.runs.length = r;
    this.knownBlocks = blocks;
  }

  private pushRun(first: number, count: number): void {
    const last = this.runs.length - 2;
    // A run that continues the previous one merges into it (keeps `runs` short).
    if (last >= 0 && this.runs[last]! + this.runs[last + 1]! === first) this.runs[last + 1]! += count;
    else this.runs.push(first, count);
    this.knownBlocks += count;
  }
}

function countBlocks(runs: readonly number[]): number {
  let blocks = 0;
  for (let r = 1; r < runs.length; r += 2) blocks += runs[r]!;
  return blocks;
}
