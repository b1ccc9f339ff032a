/** `kvroute analyze trace`, declared; analyze-verb.ts runs it. */
import type { Command } from 'commander';

import { DEFAULT_MODEL_PRESET, MODEL_PRESETS } from '../trace/model-presets.js';
import { example, runs, subcommand, withDefault } from './command-kit.js';
import { addTraceInputOptions } from './trace-options.js';

export const ANALYZE_DEFAULTS = { model: DEFAULT_MODEL_PRESET, sharedMinSessions: 8 };

export function addAnalyzeCommand(program: Command): void {
  const analyze = subcommand(program, 'analyze', 'characterize a workload: analyze trace');
  example(analyze, 'kvroute analyze trace data/mooncake_synthetic_trace.jsonl');

  const trace = subcommand(analyze, 'trace', 'characterize a trace: counts, APC ceilings, reuse, KV footprint')
    .argument('<IN>', 'the trace file, or - for stdin')
    .option('--json', 'print the summary as JSON')
    .option('--model <M>', withDefault(`KV preset: ${Object.keys(MODEL_PRESETS).join(', ')}`, ANALYZE_DEFAULTS.model))
    .option(
      '--workers <N>',
      withDefault('session shards, a Piscina thread each, beside one trie-stage thread (0: one thread)', 'cores - 1'),
    )
    .option(
      '--shared-min-sessions <N>',
      withDefault('sessions that make a prefix "shared"', ANALYZE_DEFAULTS.sharedMinSessions),
    );
  addTraceInputOptions(trace);
  example(trace, 'kvroute analyze trace data/mooncake_synthetic_trace.jsonl --infer-sessions --json');
  runs(trace, async () => (await import('./analyze-verb.js')).analyzeTraceVerb);
}
