/**
 * Per-request records of a run: what the simulator and the live replayer write, and what every
 * run analysis reads. Times are seconds on the run's clock (the simulator's virtual clock, or
 * the replayer's monotonic clock from its start).
 *
 * A record file starts with a RunHeader naming the run (its source, trace and settings), then
 * one RequestRecord per request in completion order (docs/records.md).
 */
export interface RequestRecord {
  session: string;
  turn: number;
  /** Index of the instance the request went to (the router's choice; -1 when none answered). */
  instance: number;
  /** When the request was sent to the instance. */
  dispatch: number;
  /** When the first output token arrived (equal to `finish` for a failed request). */
  first_token: number;
  finish: number;
  input_tokens: number;
  cached_tokens: number;
  output_tokens: number;
  /** A prefill ran on the same instance while this request was decoding (sim only; false live). */
  overlapped: boolean;
  /** Times the engine preempted it (recompute; sim only, 0 live). */
  preemptions: number;
  /**
   * The prompt tokens the router predicted the chosen instance to hold (Decision
   * predictedCachedTokens): the simulator's router, or live the proxy's
   * `x-kvroute-predicted-cached-tokens`. null when the target sent no such header; absent in files
   * written before it was recorded, which reads as null.
   */
  predicted_cached_tokens?: number | null;
  /**
   * Offloaded requests only (docs/offload.md): the instance that ran the prefill, whose KV then
   * moved to `instance`, which decoded. Absent for a request served where it was routed. For
   * such a request `cached_tokens` is the prefill instance's prefix-cache hit (the prompt tokens
   * no engine computed) and the fields below describe the decode instance and the transfer.
   */
  prefill_instance?: number;
  /** Offloaded: prompt tokens the decode instance served from its own prefix cache. */
  decode_cached_tokens?: number;
  /** Offloaded: tokens of KV moved from the prefill to the decode instance (what it lacked). */
  transferred_tokens?: number;
  /** Offloaded: seconds the KV transfer took. */
  transfer_s?: number;
  /**
   * sim with `--replicas R` > 1 only (docs/scale-out.md): the index (0..R-1) of the router
   * replica that routed it. Absent with one router.
   */
  replica?: number;
  /** The router's reason (`x-kvroute-reason` live, the policy's decision in the simulator). */
  reason?: string;
  /** HTTP status of a live request (200 for success); absent in the simulator. */
  status?: number;
  /** Why a live request failed; absent when it succeeded. */
  error?: string;
  /**
   * Flow control (docs/flow-control.md; the simulator with `flow`, the proxy's access log): the
   * request's tenant and priority class, and the seconds it waited for a slot before it was routed
   * (or refused). With flow control `dispatch` is when the request reached the router, so TTFT
   * counts the wait.
   */
  tenant?: string;
  priority?: string;
  queued_s?: number;
}

/** The first value of a record file. */
export interface RunHeader {
  format: typeof RECORDS_FORMAT;
  version: typeof RECORDS_VERSION;
  /** What produced the records. */
  source: 'sim' | 'replay';
  trace: {
    /** As given on the command line. */
    path: string;
    /** TraceFingerprint of the requests as read: two runs of the same trace share it. */
    fingerprint: string;
  };
  /** The routing policy (sim, or the proxy's when known), and the engine state it saw. */
  policy?: string;
  engine_state?: string;
  instances?: number;
  /** replay: the endpoint driven, and the dispatch mode (`session` or `poisson`). */
  target?: string;
  mode?: string;
  rate?: number;
  /** sim with `--replicas R` > 1 only: R, and how requests were spread over the replicas. */
  replicas?: number;
  replica_assign?: string;
  /** sim with `--cache-state events` only: `events`, each replica's cache state fed from the engines' KV events. */
  cache_state?: string;
  /**
   * sim: how min_ttft priced each instance (docs/policies.md "Learned costs"): `learned` online per
   * instance, or `fixed` (the preset's token-equivalents, as before the field existed). Absent in
   * files written before it was recorded: those ran `fixed`.
   */
  costs?: string;
  /** sim: whether min_ttft counted sessions idle between turns (--no-session-returns: false); absent in older files: false. */
  session_returns?: boolean;
  /**
   * sim: the engine preset, the multipliers it ran under (all 1 when unperturbed), and each
   * engine's KV capacity in blocks. Absent in files written before they were recorded: read
   * those as the default preset, unscaled.
   */
  preset?: string;
  engine_scaling?: EngineScalingRecord;
  capacity_blocks?: number;
  /**
   * A mixed fleet (`--fleet`, docs/engine-model.md#mixed-fleets): its spec, such as
   * `3,5:prefill=0.7:decode=0.8`, whose groups number the instances in order; each group's
   * multipliers compose with engine_scaling. Absent when every engine runs the same model.
   */
  fleet?: string;
  /** With `fleet`: each group's KV blocks per engine (capacity_blocks is the router's). */
  fleet_capacity_blocks?: number[];
  kvroute_version: string;
  /** argv after `kvroute`. */
  command: string[];
  /** ISO 8601, when the run started. */
  started_at: string;
}

/** An engine model's multipliers as files record them (docs/engine-model.md#perturbing-the-model). */
export interface EngineScalingRecord {
  prefill_cost: number;
  decode_cost: number;
  kv_capacity: number;
}

export const RECORDS_FORMAT = 'kvroute-records' as const;
export const RECORDS_VERSION = 2 as const;
