/** `kvroute sweep`, declared; sweep-verb.ts runs it (docs/sweep.md). */
import type { Command } from 'commander';

import { example, runs, subcommand, withDefault } from './command-kit.js';
import { addEngineScalingOptions, addFleetOption } from './engine-options.js';
import { addFlowOptions } from './flow-options.js';
import { addTraceInputOptions } from './trace-options.js';
import { SWEEP_DEFAULTS } from './defaults/sweep-defaults.js';

export function addSweepCommand(program: Command): void {
  const d = SWEEP_DEFAULTS;
  const sweep = subcommand(
    program,
    'sweep',
    'run every (policy × engine state) cell of one trace into one directory, with the B3 and ES ablation tables',
  )
    .argument('[IN]', 'the trace file (or give it as --trace IN)')
    .option(
      '--trace <IN>',
      'the trace file (required, as --trace or as the operand IN; read once per cell, so not stdin)',
    )
    .option('--out <DIR>', 'the sweep directory: sweep.json, cells/<id>/, tables.md (required)')
    .option('--policies <P,…>', withDefault('policies, each a name or NAME:KEY=VALUE… (tunables)', d.policies))
    .option('--engine-state <S,…>', withDefault('engine states: shadow, shm', d.engineStates))
    .option('--force', 'reuse an --out that is not empty (its previous sweep is removed)')
    .option(
      '--instances <N>',
      withDefault('engines per cell', `${d.instances} (simulator), ${d.liveInstances} (--live)`),
    )
    .option('--preset <NAME>', withDefault('engine model of the simulator and the --live fleet', d.preset))
    .option(
      '--costs <learned|fixed>',
      withDefault(
        "simulated cells: min_ttft's price of each instance, learned online or the preset's for all (the --live proxy's: its own --costs)",
        d.costs,
      ),
    )
    .option(
      '--no-session-returns',
      'simulated cells: min_ttft does not count sessions idle between turns on their instance (default: it does)',
    )
    .option('--workers <N>', withDefault('simulator cells run at once, one thread each', 'one per core'))
    .option(
      '--live',
      'run each cell through kvroute serve in front of a fresh kvroute sim serve fleet, driven by kvroute replay',
    )
    .option('--hot', '--live: one fleet for every cell instead of a cold one per cell')
    .option('--speed <X>', '--live: the fleet runs X times faster than real time')
    .option('--backends <URL,…>', 'run each cell through kvroute serve in front of these engines')
    .option('--json', 'print sweep.json, the cell summaries and the ES ablation pairs instead of the tables');
  addFleetOption(sweep);
  addEngineScalingOptions(sweep, "every simulated engine's");
  addFlowOptions(sweep, "each simulated cell's");
  addTraceInputOptions(sweep);
  example(
    sweep,
    'kvroute trace synth --sessions 50 -o synth.jsonl',
    'kvroute sweep synth.jsonl --policies sticky,unified,min_ttft --engine-state shadow,shm --out sweep-1',
  );
  example(
    sweep,
    'kvroute trace synth --sessions 30 -o synth.jsonl',
    'kvroute sweep synth.jsonl --policies unified,min_ttft --engine-state shadow --fleet 4,4:prefill=0.5:decode=0.7 --out sweep-fleet',
  );
  example(
    sweep,
    'kvroute trace synth --sessions 30 -o synth.jsonl',
    'kvroute trace transform synth.jsonl --tenants noisy=10,q1=1,q2=1 -o tenants.jsonl',
    'kvroute sweep tenants.jsonl --policies unified,min_ttft --engine-state shadow --max-in-flight 16 --out sweep-flow',
  );
  runs(sweep, async () => (await import('./sweep-verb.js')).sweepVerb);
}
