/** `kvroute tune`, declared; tune-verb.ts runs it (docs/tune.md). */
import type { Command } from 'commander';

import { POLICY_NAMES, POLICY_NAMES_TEXT, resolvePolicy, TUNABLE_NAMES, TUNABLES } from '../core/policy-spec.js';
import { ENGINE_PRESETS } from '../sim/engine-preset.js';
import { example, runs, subcommand, withDefault } from './command-kit.js';
import { addFlowOptions } from './flow-options.js';
import { AGGREGATES, OBJECTIVE_NAMES } from './tune-objectives.js';
import { addTraceInputOptions } from './trace-options.js';
import { TUNE_DEFAULTS } from './defaults/tune-defaults.js';

export function addTuneCommand(program: Command): void {
  const d = TUNE_DEFAULTS;
  const tune = subcommand(
    program,
    'tune',
    "search a policy's parameters in the simulator on worker threads; report the best setting and its margins",
  )
    .argument('[IN,…]', 'the traces to tune on (or give them as --trace IN,…)')
    .option(
      '--trace <IN,…>',
      'the traces to tune on, comma-separated (required, as --trace or as the operand; files, read once per point)',
    )
    .option('--policy <P>', `the policy to tune (required): ${POLICY_NAMES_TEXT}`)
    .option('--param <NAME=LO:HI,…>', 'the parameters to search and their bounds, both included (required; below)')
    .option('--samples <N>', withDefault('points evaluated, both rounds', d.samples))
    .option(
      '--refine <R>',
      withDefault("of --samples, points of the second round, around the first round's best", `⌊N ÷ ${d.refineShare}⌋`),
    )
    .option('--seed <K>', withDefault('seed of the search', d.seed))
    .option(
      '--objective <M>',
      withDefault(
        `minimized: ${OBJECTIVE_NAMES.join(', ')} (worst_tenant_ttft_p90 and refused_pct need --max-in-flight)`,
        d.objective,
      ),
    )
    .option(
      '--aggregate <A>',
      withDefault(`a point's objective over the traces: ${AGGREGATES.join(', ')}`, d.aggregate),
    )
    .option('--holdout <IN,…>', 'traces the best setting and the defaults are also evaluated on, never used to choose')
    .option('--instances <N>', withDefault('engines', d.instances))
    .option(
      '--fleet <SPEC>',
      'a mixed fleet instead of --instances: COUNT[:prefill=X][:decode=Y][:kv=Z][,COUNT…] (docs/engine-model.md#mixed-fleets)',
    )
    .option('--engine-state <shadow|shm>', withDefault("the router's view of the engines", d.engineState))
    .option('--preset <NAME>', withDefault(`engine model: ${Object.keys(ENGINE_PRESETS).join(', ')}`, d.preset))
    .option('--workers <N>', withDefault('simulations run at once, one thread each', 'one per core'))
    .option('--json', 'print the result as JSON instead of the tables')
    .option('--out <FILE>', 'also write the JSON result to FILE (atomically)');
  addFlowOptions(tune, 'every');
  addTraceInputOptions(tune);
  tune.addHelpText('after', `\nTunable parameters (--param NAME=LO:HI):\n${tunableLines()}`);
  example(
    tune,
    'for s in 1 2 3 11 12 13; do kvroute trace synth --sessions 30 --seed $s -o seed$s.jsonl; done',
    'kvroute tune seed1.jsonl,seed2.jsonl,seed3.jsonl --holdout seed11.jsonl,seed12.jsonl,seed13.jsonl --policy unified --param overloadFactor=1:3,decodeWeight=0:1 --samples 16',
  );
  example(
    tune,
    'kvroute trace synth --sessions 20 --seed 1 -o seed1.jsonl',
    'kvroute tune seed1.jsonl --policy unified --param overloadFactor=1:3 --samples 4 --fleet 2:prefill=0.5:decode=0.7,2',
  );
  example(
    tune,
    'kvroute trace synth --sessions 20 --seed 1 -o seed1.jsonl',
    'kvroute trace transform seed1.jsonl --tenants noisy=10,q1=1 -o tenants1.jsonl',
    'kvroute tune tenants1.jsonl --policy unified --param overloadFactor=1:3 --samples 4 --max-in-flight 8 --objective worst_tenant_ttft_p90',
  );
  runs(tune, async () => (await import('./tune-verb.js')).tuneVerb);
}

/** Two lines per row of TUNABLES: name, range, default, the policies that read it; its meaning. */
function tunableLines(): string {
  return TUNABLE_NAMES.map((name) => {
    const t = TUNABLES[name];
    const presets = POLICY_NAMES.filter((p) => resolvePolicy(p)[name] !== t.default).map(
      (p) => `, ${resolvePolicy(p)[name]} in ${p}`,
    );
    const facts = `${t.integer ? 'integer' : 'number'} in [${t.min}, ${compact(t.max)}], default ${t.default}${presets.join('')}; read by ${t.kinds.join(', ')}`;
    return `  ${name.padEnd(19)}${facts}\n  ${''.padEnd(19)}${t.meaning}`;
  }).join('\n');
}

/** 1e9 rather than 1000000000. */
function compact(value: number): string {
  return value >= 1e6 ? value.toExponential().replace('e+', 'e') : String(value);
}
