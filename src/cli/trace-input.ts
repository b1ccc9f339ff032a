/**
 * What the trace-reading verbs' shared flags (declared by addTraceInputOptions in
 * trace-options.ts) mean to the reader, and how the reader's warnings are reported.
 */
import { TIME_UNITS, WARNING_KINDS, type ReadTraceOptions, type TraceReadStats } from '../trace/read-trace.js';
import { TRACE_FORMATS } from '../trace/types.js';
import { choiceFlag, integerFlag, type OptionValues } from './common.js';
import { counted } from './counted.js';

/** The reader's options from the flags; a bad value is a UsageError naming its flag. */
export function readerOptions(values: OptionValues): ReadTraceOptions {
  const options: ReadTraceOptions = {
    format: choiceFlag(values, 'format', ['auto', ...TRACE_FORMATS]) ?? 'auto',
    strict: values.strict === true,
    inferSessions: values['infer-sessions'] === true,
  };
  const blockSize = integerFlag(values, 'block-size', 1);
  if (blockSize !== undefined) options.blockSize = blockSize;
  const timeUnit = choiceFlag(values, 'time-unit', TIME_UNITS);
  if (timeUnit !== undefined) options.timeUnit = timeUnit;
  const reorderWindow = integerFlag(values, 'reorder-window', 1);
  if (reorderWindow !== undefined) options.reorderWindow = reorderWindow;
  return options;
}

/** One stderr line per note the reader made and per kind of warning it counted. */
export function reportWarnings(verb: string, stats: TraceReadStats): void {
  for (const note of stats.notes) process.stderr.write(`kvroute ${verb}: note: ${note}\n`);
  for (const kind of WARNING_KINDS) {
    const count = stats.warnings[kind];
    if (count === 0) continue;
    if (kind === 'time_unit') {
      // A judgement on the whole trace, not a count of lines.
      process.stderr.write(`kvroute ${verb}: warning: ${stats.firstWarning[kind]}\n`);
      continue;
    }
    process.stderr.write(
      `kvroute ${verb}: warning: ${counted(count, 'line')} with ${kind}; first: ${stats.firstWarning[kind]}\n`,
    );
  }
}
