/** `kvroute analyze trace | run | compare`, declared; analyze-verb.ts and analyze-run-verb.ts run them. */
import type { Command } from 'commander';

import { MODEL_PRESETS } from '../trace/model-presets.js';
import { example, runs, subcommand, withDefault } from './command-kit.js';
import { addTraceInputOptions } from './trace-options.js';
import { ANALYZE_DEFAULTS } from './defaults/analyze-defaults.js';

export function addAnalyzeCommand(program: Command): void {
  const analyze = subcommand(
    program,
    'analyze',
    'characterize a workload or a run: analyze trace, analyze run, analyze compare',
  );
  example(
    analyze,
    'kvroute analyze trace data/mooncake_synthetic_trace.jsonl',
    'kvroute sim run data/mooncake_synthetic_trace.jsonl --records run.records',
    'kvroute analyze run run.records',
  );
  addTrace(analyze);
  addRun(analyze);
  addCompare(analyze);
}

function addTrace(analyze: Command): void {
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

function addRun(analyze: Command): void {
  const run = subcommand(
    analyze,
    'run',
    'the metrics of a run from its records (sim run --records, replay --records): latency, APC, indices, slow requests by cause',
  )
    .argument('<RECORDS>', 'the record file')
    .option('--json', 'print the metrics as JSON (the keys of sim run --json, plus slow and reuse)')
    .option('--slo <ttft=…,tpot=…>', withDefault('the SLO a slow request misses (units s or ms)', ANALYZE_DEFAULTS.slo))
    .option(
      '--engine-state <FILE>',
      "the replay's engine-state log: the hot-worker rule also reads each instance's waiting queue",
    )
    .option('--skip-reuse', "no reuse split: read the records only, not the trace (a trace walk's time)")
    .option('--trace <IN>', withDefault('the trace the run replayed, for the reuse split', "the records' header's"))
    .option('--workers <N>', withDefault('Piscina threads for the reuse walk (0: this thread)', 'cores - 1'))
    .option(
      '--shared-min-sessions <N>',
      withDefault('sessions that make a prefix "shared"', ANALYZE_DEFAULTS.sharedMinSessions),
    );
  addTraceInputOptions(run);
  run.addHelpText('after', '\nSlow-cause rules, metric definitions: docs/analysis.md.');
  example(
    run,
    'kvroute sim run data/mooncake_synthetic_trace.jsonl --policy unified --records unified.records',
    'kvroute analyze run unified.records --slo ttft=5s,tpot=100ms',
  );
  runs(run, async () => (await import('./analyze-run-verb.js')).analyzeRunVerb);
}

function addCompare(analyze: Command): void {
  const compare = subcommand(
    analyze,
    'compare',
    "two runs of one trace (the ES ablation's cmp_es): reroute %, instances per session, TTFT p90 and mean A → B, a verdict",
  )
    .argument('<A>', 'the baseline record file')
    .argument('<B>', 'the record file compared with it')
    .option('--json', 'print the comparison as JSON');
  compare.addHelpText('after', '\nVerdict on the TTFT p90 change: HELPS ≤ −5 %, HURTS ≥ +5 %, wash between.');
  example(
    compare,
    'kvroute sim run data/mooncake_synthetic_trace.jsonl --policy sticky --engine-state shadow --records sticky-shadow.records',
    'kvroute sim run data/mooncake_synthetic_trace.jsonl --policy sticky --engine-state shm --records sticky-shm.records',
    'kvroute analyze compare sticky-shadow.records sticky-shm.records',
  );
  runs(compare, async () => (await import('./analyze-run-verb.js')).analyzeCompareVerb);
}
