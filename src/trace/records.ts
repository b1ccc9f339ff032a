/**
 * Per-request records of a run: what the simulator and (later) the live replayer write, and what
 * run metrics read. Times are seconds on the run's clock.
 */
export interface RequestRecord {
  session: string;
  turn: number;
  /** Index of the instance the router chose. */
  instance: number;
  /** When the request was sent to the instance. */
  dispatch: number;
  first_token: number;
  finish: number;
  input_tokens: number;
  cached_tokens: number;
  output_tokens: number;
  /** A prefill ran on the same instance while this request was decoding. */
  overlapped: boolean;
  /** Times the engine preempted it (recompute). */
  preemptions: number;
}
