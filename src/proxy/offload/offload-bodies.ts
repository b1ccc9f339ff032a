/**
 * The bytes of vLLM's disaggregated-prefill protocol as the proxy speaks it (docs/proxy.md
 * "Prefill offload"; vLLM's NIXL toy proxy does the same with dicts):
 *
 *   prefill request   the client's body with `max_tokens: 1` (and `max_completion_tokens: 1` when
 *                     it has one), `stream: false`, no `stream_options`, no `min_tokens` /
 *                     `min_completion_tokens` (vLLM refuses min_tokens > max_tokens), and
 *                     `kv_transfer_params: {do_remote_decode: true, do_remote_prefill: false,
 *                     remote_engine_id: null, remote_block_ids: null, remote_host: null,
 *                     remote_port: null}`;
 *   its answer        JSON whose top-level `kv_transfer_params` (a non-empty object) is taken as
 *                     the engine wrote it;
 *   decode request    the client's body plus those params (any `kv_transfer_params` the client
 *                     sent replaced);
 *   decode answer     relayed without a top-level `kv_transfer_params` (vLLM writes
 *                     `"kv_transfer_params":null` into every non-streaming response; its
 *                     stream chunks have no such field, but an engine that echoes it there
 *                     loses it too).
 *
 * Every edit is a splice of top-level members (json-members.ts): one walk of the client's body
 * serves both requests, and the prompt is copied, never parsed or serialised.
 */
import { rebuildObject, topLevelMembers, withoutMember, type JsonMember } from './json-members.js';

export const KV_TRANSFER_PARAMS = 'kv_transfer_params';
const NEEDLE = Buffer.from(`"${KV_TRANSFER_PARAMS}"`);

/** What the prefill request asks of the prefill instance. */
const PREFILL_PARAMS =
  '{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,' +
  '"remote_block_ids":null,"remote_host":null,"remote_port":null}';

/** Members the prefill request replaces or leaves out. */
const PREFILL_DROPS: ReadonlySet<string> = new Set([
  'max_tokens',
  'max_completion_tokens',
  'stream',
  'stream_options',
  'min_tokens',
  'min_completion_tokens',
  KV_TRANSFER_PARAMS,
]);
const DECODE_DROPS: ReadonlySet<string> = new Set([KV_TRANSFER_PARAMS]);

/** The client's body, walked once, ready to become the prefill and the decode request. */
export class OffloadBodies {
  private constructor(
    private readonly body: Buffer,
    private readonly members: readonly JsonMember[],
  ) {}

  /** undefined when the body is not a JSON object (the scanner passed it, so only in theory). */
  static of(body: Buffer): OffloadBodies | undefined {
    const members = topLevelMembers(body);
    return members === undefined ? undefined : new OffloadBodies(body, members);
  }

  /** The prefill request's body. */
  prefill(): Buffer {
    const completionTokens = this.members.some((m) => m.key === 'max_completion_tokens');
    const append =
      `"max_tokens":1,${completionTokens ? '"max_completion_tokens":1,' : ''}"stream":false,` +
      `"${KV_TRANSFER_PARAMS}":${PREFILL_PARAMS}`;
    return rebuildObject(this.body, this.members, PREFILL_DROPS, append);
  }

  /** The decode request's body: the client's plus `params` (JSON text of an object). */
  decode(params: string): Buffer {
    return rebuildObject(this.body, this.members, DECODE_DROPS, `"${KV_TRANSFER_PARAMS}":${params}`);
  }
}

/**
 * The prefill answer's `kv_transfer_params` as JSON text, or undefined when the body is not a
 * JSON object or the member is missing, null, not an object, or empty (vLLM's toy proxy forwards
 * nothing then either). Only the member's own bytes are parsed (a check), whatever else the
 * answer holds (prompt logprobs, say).
 */
export function transferParamsOf(answer: Buffer): string | undefined {
  if (answer.indexOf(NEEDLE) < 0) return undefined;
  const members = topLevelMembers(answer);
  const member = members?.findLast((m) => m.key === KV_TRANSFER_PARAMS);
  if (member === undefined) return undefined;
  const text = answer.toString('utf8', member.valueStart, member.end);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value) || Object.keys(value).length === 0)
    return undefined;
  return text;
}

/** A non-streaming decode answer without its top-level `kv_transfer_params` (the same Buffer if it has none). */
export function withoutTransferParams(body: Buffer): Buffer {
  return withoutMember(body, KV_TRANSFER_PARAMS, NEEDLE);
}

const LF = 0x0a;
const EVENT_END = Buffer.from('\n\n');
const EVENT_END_CRLF = Buffer.from('\r\n\r\n');
const DATA = 'data:';
/** An incomplete event longer than this is passed on as it is (its field, if any, unstripped). */
const MAX_CARRY = 1 << 20;

/**
 * Removes a top-level `kv_transfer_params` from the JSON of each SSE `data:` line of a decode
 * stream. Only whole events go out: the bytes after a chunk's last blank line wait for the rest
 * of their event (engines write one event per write, so nothing waits in practice), so a field
 * cut across two reads is still seen. Per chunk: a search for the last event end and one for the
 * field's name; an event is rewritten only when the name is in it.
 */
export class SseTransferParamsStripper {
  private carry: Buffer | undefined;

  /** The bytes to send for this upstream chunk (possibly empty). */
  feed(chunk: Buffer): Buffer {
    let buf = chunk;
    if (this.carry !== undefined) {
      buf = Buffer.concat([this.carry, chunk]);
      this.carry = undefined;
    }
    const lf = buf.lastIndexOf(EVENT_END);
    const crlf = buf.lastIndexOf(EVENT_END_CRLF);
    const complete = Math.max(lf < 0 ? 0 : lf + EVENT_END.length, crlf < 0 ? 0 : crlf + EVENT_END_CRLF.length);
    if (complete < buf.length) {
      if (buf.length - complete > MAX_CARRY) return buf; // a runaway event: give up on it, send as is
      this.carry = Buffer.from(buf.subarray(complete));
      buf = buf.subarray(0, complete);
    }
    if (buf.length === 0 || buf.indexOf(NEEDLE) < 0) return buf;
    return stripEvents(buf);
  }

  /** What is still held at the stream's end (an unterminated last event), as it came. */
  flush(): Buffer | undefined {
    const rest = this.carry;
    this.carry = undefined;
    return rest;
  }
}

/** Whole SSE events with the field removed from every `data:` line that holds it. */
function stripEvents(buf: Buffer): Buffer {
  const parts: Buffer[] = [];
  let from = 0;
  while (from < buf.length) {
    let lineEnd = buf.indexOf(LF, from);
    lineEnd = lineEnd < 0 ? buf.length : lineEnd + 1;
    const line = buf.subarray(from, lineEnd);
    parts.push(line.indexOf(NEEDLE) >= 0 ? stripDataLine(line) : line);
    from = lineEnd;
  }
  return Buffer.concat(parts);
}

/** `data: {…}\n` without the field; any other line (or data that is not an object) unchanged. */
function stripDataLine(line: Buffer): Buffer {
  if (line.toString('latin1', 0, DATA.length) !== DATA) return line;
  let start = DATA.length;
  if (line[start] === 0x20) start++;
  let end = line.length;
  while (end > start && (line[end - 1] === LF || line[end - 1] === 0x0d)) end--;
  const json = line.subarray(start, end);
  const stripped = withoutTransferParams(json);
  if (stripped === json) return line;
  return Buffer.concat([line.subarray(0, start), stripped, line.subarray(end)]);
}
