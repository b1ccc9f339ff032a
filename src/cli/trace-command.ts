/** `kvroute trace synth | transform | validate`, declared; trace-verb.ts runs them. */
import type { Command } from 'commander';

import { ARRIVAL_PROCESSES } from '../trace/synth-arrivals.js';
import { SYNTH_DEFAULTS } from '../trace/synth-options.js';
import { example, runs, subcommand, withDefault } from './command-kit.js';
import { addTraceInputOptions, addTraceOutputOptions } from './trace-options.js';

export function addTraceCommand(program: Command): void {
  const trace = subcommand(program, 'trace', 'write, rewrite or check a trace: synth, transform, validate');
  example(trace, 'kvroute trace synth --sessions 30 -o synth.jsonl && kvroute trace validate synth.jsonl');

  const d = SYNTH_DEFAULTS;
  const synth = subcommand(trace, 'synth', 'write a synthetic agentic-coding session trace (calibrated to the w600)')
    .option('--sessions <N>', withDefault('sessions, sub-agents included (before --scale)', d.sessions))
    .option('--duration <S>', withDefault('seconds over which root sessions start', d.duration))
    .option(
      `--arrivals <${ARRIVAL_PROCESSES.join('|')}>`,
      withDefault('how root sessions start: spread evenly, memoryless gaps, or bursts', d.arrivals),
    )
    .option('--burst-on <S>', withDefault('on-off: seconds of each ON period, where every root starts', d.burstOn))
    .option('--burst-off <S>', withDefault('on-off: seconds of each OFF period, where none does', d.burstOff))
    .option('--seed <K>', withDefault('PRNG seed: the same flags give a byte-identical trace', d.seed))
    .option('--block-size <B>', withDefault('tokens per hash block', d.blockSize))
    .option('--scale <X>', withDefault('multiplies the sessions over the same duration', d.scale))
    .option(
      '--system-prefix <TOKENS>',
      withDefault('tokens of the shared system prefix (0: none)', d.systemPrefixTokens),
    );
  addTraceOutputOptions(synth, 'session');
  example(
    synth,
    'kvroute trace synth --sessions 100 --seed 7 -o synth.jsonl',
    'kvroute trace synth --seed 11 --arrivals on-off --burst-on 20 --burst-off 60 -o bursty.jsonl',
  );
  runs(synth, async () => (await import('./trace-verb.js')).synthVerb);

  const transform = subcommand(
    trace,
    'transform',
    'window, sample, cap, rescale, re-block or assign tenants to a trace, streaming',
  )
    .argument('<IN>', 'the trace file, or - for stdin')
    .option('--window <S>', 'keep arrivals in [T, T+S) of --window-start T, re-based to 0')
    .option('--window-start <T>', withDefault('where the window starts, in seconds', 'the first arrival'))
    .option('--sample-sessions <R>', 'keep each session with probability R, in (0, 1]')
    .option('--seed <K>', withDefault("--sample-sessions' seed", 0))
    .option('--cap-turns <N>', "keep each session's first N requests")
    .option('--time-scale <F>', 'multiply arrival times by F')
    .option('--reblock <B>', "merge blocks into B-token blocks (a multiple of the input's)")
    .option(
      '--tenants <SPEC>',
      'give each session a tenant (and class) by share, NAME=SHARE[:CLASS],… e.g. noisy=10:low,q1=1,q2=1 (docs/flow-control.md)',
    );
  addTraceOutputOptions(transform, "the input's");
  addTraceInputOptions(transform);
  example(
    transform,
    'kvroute trace transform data/mooncake_synthetic_trace.jsonl --window 600 --cap-turns 20 -o window.jsonl',
    'kvroute trace transform data/mooncake_synthetic_trace.jsonl --tenants noisy=10,q1=1,q2=1,q3=1 -o tenants.jsonl',
  );
  runs(transform, async () => (await import('./trace-verb.js')).transformVerb);

  const validate = subcommand(trace, 'validate', 'check every line of a trace; print counts and warnings')
    .argument('<IN>', 'the trace file, or - for stdin')
    .option('--json', 'print the counts as JSON');
  addTraceInputOptions(validate);
  example(validate, 'kvroute trace validate data/mooncake_synthetic_trace.jsonl --strict');
  runs(validate, async () => (await import('./trace-verb.js')).validateVerb);
}
