/**
 * Running counts of a replay, updated as records come: what the progress display polls and what
 * the SLO check (find-srr) reads. TPOT is (finish − first_token) ÷ (output_tokens − 1), for
 * successful requests with at least two output tokens.
 */
import type { RequestRecord } from '../trace/records.js';

export class ReplayTally {
  sent = 0;
  done = 0;
  errors = 0;
  aborted = 0;
  lastFinish = 0;
  lastError: string | undefined;
  /** Prompt and cached tokens of successful requests (usage, else the trace's prompt length). */
  inputTokens = 0;
  cachedTokens = 0;
  readonly ttft: number[] = [];
  readonly tpot: number[] = [];

  /** Requests in flight now. */
  get inFlight(): number {
    return this.sent - this.done;
  }

  finish(record: RequestRecord): void {
    this.done++;
    if (record.finish > this.lastFinish) this.lastFinish = record.finish;
    if (record.error !== undefined) {
      this.errors++;
      if (record.error.startsWith('aborted')) this.aborted++;
      this.lastError = record.error;
      return;
    }
    this.inputTokens += record.input_tokens;
    this.cachedTokens += record.cached_tokens;
    this.ttft.push(record.first_token - record.dispatch);
    if (record.output_tokens > 1) this.tpot.push((record.finish - record.first_token) / (record.output_tokens - 1));
  }
}
