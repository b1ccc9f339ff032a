/**
 * The trace flags several verbs share, declared once: how a trace is read (`trace transform`,
 * `trace validate`, `analyze trace`, `sim run`; trace-input.ts maps them to ReadTraceOptions) and
 * how one is written (`trace synth`, `trace transform`).
 *
 * Loaded by every `kvroute` run, so it never imports the trace reader: the reorder window's
 * default is repeated here, and test/cli-help.test.ts checks it against src/trace/read-trace.ts.
 */
import type { Command } from 'commander';

import { TIME_UNITS, TRACE_FORMATS } from '../trace/types.js';
import { addOptionGroup, withDefault } from './command-kit.js';

const REORDER_WINDOW_DEFAULT = 1024;

/** --format, --block-size, --strict, --infer-sessions, --time-unit, --reorder-window. */
export function addTraceInputOptions(command: Command): Command {
  return addOptionGroup(command, 'Trace input:', [
    [
      '--format <F>',
      withDefault(
        `input format: auto, ${TRACE_FORMATS.join(' or ')}`,
        'auto, session when the first line has session_id or chat_id',
      ),
    ],
    [
      '--block-size <B>',
      withDefault(
        'tokens per block of lines without block_size',
        'inferred: 512 mooncake, 16 session when they fit (docs/traces.md)',
      ),
    ],
    [
      '--strict',
      'treat length mismatches, lines out of order, unknown parent_chat_id and an implausible time unit as errors',
    ],
    ['--infer-sessions', "Mooncake: a request extending an earlier request's full hash_ids continues its session"],
    [
      `--time-unit <${TIME_UNITS.join('|')}>`,
      withDefault('the unit of timestamp; stating it silences the plausibility check', 'ms mooncake, s session'),
    ],
    ['--reorder-window <N>', withDefault('lines held to sort the trace into arrival order', REORDER_WINDOW_DEFAULT)],
  ]);
}

/** -o/--output and --to; `formatDefault` says what --to defaults to. */
export function addTraceOutputOptions(command: Command, formatDefault: string): Command {
  return addOptionGroup(command, 'Trace output:', [
    ['-o, --output <FILE>', withDefault('where to write the trace; files are written atomically', 'stdout')],
    [`--to <${TRACE_FORMATS.join('|')}>`, withDefault('output format', formatDefault)],
  ]);
}
