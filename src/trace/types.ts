/**
 * The one in-memory form every trace format reads into and writes from.
 *
 * Invariants a valid trace keeps (the readers enforce them, the writers assume them):
 * - requests appear in arrival order (`arrival` non-decreasing);
 * - within a session, `turn` strictly increases;
 * - `hashIds[i]` stands for the prompt's first `(i + 1) × blockSize` tokens (ids are chained:
 *   two requests share block i only if they share blocks 0..i), and
 *   `hashIds.length === ceil(inputLength / blockSize)` (the partial last block has an id).
 */
export interface TraceRequest {
  /** Session id; sessionless traces give each request its own (see `sessionless`). */
  session: string;
  /** Position of this request in its session; strictly increasing within a session. */
  turn: number;
  /** Arrival time in seconds from the start of the trace. */
  arrival: number;
  /** Prompt tokens. */
  inputLength: number;
  /** Generated tokens. */
  outputLength: number;
  /** One id per prompt block, chained (see the interface comment). Integers. */
  hashIds: number[];
  /** Tokens per block of `hashIds`. */
  blockSize: number;
  /** True when the source carried no session (Mooncake without `--infer-sessions`). */
  sessionless?: boolean;
  /** Bailian-style ids, kept for round trips. `parentChatId` is -1 for a root. */
  chatId?: number;
  parentChatId?: number;
  /** Flow control's tenant (docs/flow-control.md): the `tenant` field; absent: the default tenant. */
  tenant?: string;
  /** Flow control's priority class by name: the `priority` field; absent: the default class. */
  priority?: string;
}

/** The formats kvroute reads and writes. */
export type TraceFormat = 'mooncake' | 'session';

export const TRACE_FORMATS: readonly TraceFormat[] = ['mooncake', 'session'];

/** Block size each format declares when a line does not say. */
export const DEFAULT_BLOCK_SIZE: Record<TraceFormat, number> = { mooncake: 512, session: 16 };

/** Units a trace's `timestamp` may be written in. */
export const TIME_UNITS = ['s', 'ms'] as const;
export type TimeUnit = (typeof TIME_UNITS)[number];
