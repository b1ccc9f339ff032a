/** `kvroute analyze trace FILE` (declared in analyze-command.ts): workload characterization on Piscina workers. */
import { characterizeTrace } from '../analysis/characterize.js';
import { formatDuration } from '../analysis/format-units.js';
import { renderSummary } from '../analysis/render-summary.js';
import { MODEL_PRESETS } from '../trace/model-presets.js';
import { readTrace } from '../trace/read-trace.js';
import { ANALYZE_DEFAULTS } from './defaults/analyze-defaults.js';
import { choiceFlag, integerFlag, type OptionValues } from './common.js';
import { checkInputFile, TRACE_FILE } from './input-file.js';
import { withProgress } from './progress.js';
import { readerOptions, reportWarnings } from './trace-input.js';
import { readerProgress } from './work-progress.js';

export async function analyzeTraceVerb(values: OptionValues, [input]: string[]): Promise<void> {
  checkInputFile('analyze trace', input!, TRACE_FILE);
  const reader = readTrace(input!, readerOptions(values));
  const started = performance.now();
  const options: Parameters<typeof characterizeTrace>[1] = {
    model: choiceFlag(values, 'model', Object.keys(MODEL_PRESETS)) ?? ANALYZE_DEFAULTS.model,
    sharedMinSessions: integerFlag(values, 'shared-min-sessions', 1) ?? ANALYZE_DEFAULTS.sharedMinSessions,
  };
  const workers = integerFlag(values, 'workers', 0);
  if (workers !== undefined) options.workers = workers;
  const summary = await withProgress(readerProgress('analyze trace', reader), () => characterizeTrace(reader, options));
  reportWarnings('analyze trace', reader.stats);
  if (values.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
  else {
    process.stdout.write(`${renderSummary(summary)}\n`);
    process.stderr.write(`(${formatDuration((performance.now() - started) / 1000)})\n`);
  }
}
