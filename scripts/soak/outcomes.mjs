// @ts-check
/**
 * What became of every request the soak sent. Each ends in exactly one of:
 *
 * - `completed`: 200 and a whole answer (a JSON body with choices, or a stream ending `[DONE]`);
 * - `failed`: an answer that says why: an HTTP error status with its `error.code`, or a stream's
 *   in-band SSE error event (`upstream_interrupted`). Failures are later tied to the fault windows
 *   they overlap (report.mjs); one that overlaps none is unexplained;
 * - `rejected`: a request the soak made bad on purpose (oversized, malformed) answered with the
 *   status it should get;
 * - `aborted`: a request the soak itself aborted (the client-abort fault);
 * - `lost`: no answer at all: the connection closed or timed out before a status, a body cut
 *   without an error event, a 200 whose body is not a whole answer, or a bad request answered with
 *   the wrong status. Any lost request fails the soak.
 */

export class Outcomes {
  constructor() {
    this.sent = 0;
    this.completed = 0;
    this.streamed = 0;
    this.rejected = 0;
    this.aborted = 0;
    /** @type {{ at: number, end: number, cause: string, kind: string }[]} */
    this.failures = [];
    /** @type {{ at: number, end: number, cause: string, kind: string }[]} */
    this.lost = [];
    /** @type {Record<string, number>} */
    this.rejectedBy = {};
    // The router's predicted cached tokens (x-kvroute-predicted-cached-tokens) against the engine's
    // usage.prompt_tokens_details.cached_tokens, over completed requests that carried both.
    this.prediction = { requests: 0, predicted: 0, engine: 0, absError: 0, exact: 0 };
  }

  /**
   * @param {'completed' | 'failed' | 'rejected' | 'aborted' | 'lost'} outcome
   * @param {{ kind: string, at: number, cause?: string, stream?: boolean }} request
   */
  record(outcome, request) {
    const end = Date.now();
    const entry = { at: request.at, end, cause: request.cause ?? outcome, kind: request.kind };
    if (outcome === 'completed') {
      this.completed++;
      if (request.stream === true) this.streamed++;
    } else if (outcome === 'failed') this.failures.push(entry);
    else if (outcome === 'lost') this.lost.push(entry);
    else if (outcome === 'aborted') this.aborted++;
    else {
      this.rejected++;
      this.rejectedBy[entry.cause] = (this.rejectedBy[entry.cause] ?? 0) + 1;
    }
  }

  /**
   * @param {number} predicted
   * @param {number} engine
   */
  observePrediction(predicted, engine) {
    const p = this.prediction;
    p.requests++;
    p.predicted += predicted;
    p.engine += engine;
    p.absError += Math.abs(predicted - engine);
    if (predicted === engine) p.exact++;
  }
}

/**
 * The error code of a JSON error body (`{"error":{"code":…}}`), else the first 60 characters.
 * @param {string} text
 */
export function errorCode(text) {
  try {
    const body = JSON.parse(text);
    const code = body?.error?.code;
    if (code !== undefined && code !== null) return String(code);
  } catch {
    // not JSON: fall through
  }
  return text.slice(0, 60).replace(/\s+/g, ' ');
}

/**
 * Reads an SSE body: whether it ended with `[DONE]`, the first in-band error code, and the usage.
 * @param {string} text
 * @returns {{ done: boolean, error: string | null, usage: any }}
 */
export function readStream(text) {
  let done = false;
  /** @type {string | null} */
  let error = null;
  let usage = null;
  for (const event of text.split('\n\n')) {
    const line = event.trim();
    if (!line.startsWith('data:')) continue;
    const data = line.slice(5).trim();
    if (data === '[DONE]') {
      done = true;
      continue;
    }
    try {
      const chunk = JSON.parse(data);
      if (chunk.error !== undefined && error === null) error = String(chunk.error.code ?? chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
    } catch {
      error ??= 'unparsable SSE event';
    }
  }
  return { done, error, usage };
}
