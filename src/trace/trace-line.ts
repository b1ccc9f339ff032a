/**
 * One trace line, parsed and field-checked but not yet placed: its timestamp is still in the
 * file's unit and its session not yet resolved, because both depend on decisions the reader
 * makes after reading ahead (the time unit, the block size) and on arrival order (sessions
 * are resolved in sorted order, so a parent chat may follow its child in the file).
 */
import { LineFields, type JsonObject } from './line-fields.js';
import type { TraceFormat } from './types.js';

export interface TraceLine {
  fields: LineFields;
  /** 1-based line number in the file. */
  line: number;
  /** As written, in the file's unit. */
  timestamp: number;
  /** Seconds; set when the line is placed. */
  arrival: number;
  inputLength: number;
  outputLength: number;
  hashIds: number[];
  /** The line's own `block_size`, if it has one. */
  blockSizeField: number | undefined;
  /** The block size the line is read at; set when the line is placed. */
  blockSize: number;
  sessionId?: string;
  turn?: number;
  chatId?: number;
  parentChatId?: number;
  tenant?: string;
  priority?: string;
}

/** Parses `text` (line `line` of `source`) or throws a TraceFormatError naming the line. */
export function parseLineObject(text: string, line: number, source: string): LineFields {
  let object: unknown;
  try {
    object = JSON.parse(text);
  } catch (error) {
    new LineFields({}, line, source).fail(undefined, `malformed JSON (${(error as Error).message})`);
  }
  if (typeof object !== 'object' || object === null || Array.isArray(object))
    new LineFields({}, line, source).fail(undefined, 'expected a JSON object');
  return new LineFields(object as JsonObject, line, source);
}

/** The fields of `format` from one line; every check that needs only the line itself. */
export function traceLine(fields: LineFields, format: TraceFormat): TraceLine {
  const line: TraceLine = {
    fields,
    line: fields.line,
    timestamp: fields.time('timestamp'),
    arrival: 0,
    inputLength: fields.count('input_length'),
    outputLength: fields.count('output_length'),
    hashIds: fields.hashIds('hash_ids'),
    blockSizeField: fields.optionalCount('block_size', 1),
    blockSize: 0,
  };
  // Flow control's extensions, in either format (docs/trace-formats.md).
  const tenant = fields.optionalName('tenant');
  const priority = fields.optionalName('priority');
  if (tenant !== undefined) line.tenant = tenant;
  if (priority !== undefined) line.priority = priority;
  if (format === 'mooncake') return line;
  const sessionId = fields.optionalName('session_id');
  const turn = fields.optionalCount('turn', 0);
  const chatId = fields.optionalId('chat_id');
  const parentChatId = fields.optionalId('parent_chat_id');
  if (sessionId === undefined && chatId === undefined)
    fields.fail('session_id', 'missing field (a session trace needs session_id, or chat_id and parent_chat_id)');
  if (sessionId !== undefined) line.sessionId = sessionId;
  if (turn !== undefined) line.turn = turn;
  if (chatId !== undefined) line.chatId = chatId;
  if (parentChatId !== undefined) line.parentChatId = parentChatId;
  return line;
}
