/** `kvroute analyze trace FILE`: workload characterization on Piscina workers. */
import { parseArgs } from 'node:util';

import { characterizeTrace } from '../analysis/characterize.js';
import { formatDuration } from '../analysis/format-units.js';
import { renderSummary } from '../analysis/render-summary.js';
import { MODEL_PRESETS } from '../trace/model-presets.js';
import { readTrace } from '../trace/read-trace.js';
import { choiceFlag, integerFlag, UsageError } from './common.js';
import { withProgress } from './progress.js';
import { readerOptions, reportWarnings, TRACE_INPUT_OPTIONS, TRACE_INPUT_USAGE } from './trace-input.js';
import { readerProgress } from './work-progress.js';

export const ANALYZE_USAGE = `  analyze trace IN  characterize a workload: counts, APC ceilings, reuse, KV footprint
                    --json            print the summary as JSON
                    --model M         KV preset: ${Object.keys(MODEL_PRESETS).join(', ')}
                    --workers N       session shards, a Piscina thread each, beside one trie-stage
                                      thread (default: cores - 1; 0: everything in one thread)
                    --shared-min-sessions N   sessions that make a prefix "shared" (default 8)
${TRACE_INPUT_USAGE}`;

export async function analyzeVerb(args: string[]): Promise<void> {
  const [what, ...rest] = args;
  if (what !== 'trace')
    throw new UsageError(`analyze needs a subject: trace${what === undefined ? '' : `, got ${what}`}`);
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      ...TRACE_INPUT_OPTIONS,
      json: { type: 'boolean' },
      model: { type: 'string' },
      workers: { type: 'string' },
      'shared-min-sessions': { type: 'string' },
    },
  });
  if (positionals.length !== 1) throw new UsageError('analyze trace takes one input file (or -)');
  const reader = readTrace(positionals[0]!, readerOptions(values));
  const started = performance.now();
  const options: Parameters<typeof characterizeTrace>[1] = {
    model: choiceFlag(values, 'model', Object.keys(MODEL_PRESETS)) ?? 'qwen3-coder-30b-a3b',
    sharedMinSessions: integerFlag(values, 'shared-min-sessions', 1) ?? 8,
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
