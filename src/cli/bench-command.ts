/**
 * `kvroute bench interference`, declared; bench-verb.ts runs it. The B2 microbench against
 * live endpoints, by the protocol of `kvroute sim interference` (src/sim/interference-protocol.ts).
 */
import type { Command } from 'commander';

import {
  INTERFERENCE_PREFILL_TOKENS,
  INTERFERENCE_SCHEDULE,
  INTERFERENCE_VARIANTS,
} from '../sim/interference-protocol.js';
import { example, runs, subcommand, withDefault } from './command-kit.js';
import { BENCH_INTERFERENCE_DEFAULTS } from './defaults/bench-defaults.js';

export function addBenchCommand(program: Command): void {
  const bench = subcommand(program, 'bench', 'experiments against live endpoints: bench interference');
  example(bench, 'kvroute bench interference --sim --speed 5 --prefill-sizes 8192');
  const s = INTERFERENCE_SCHEDULE;
  const interference = subcommand(
    bench,
    'interference',
    'the B2 microbench against two live endpoints: TTFT and TPOT indices of a steady decode load when cold prefills land on the same or the other endpoint',
  )
    .option('--decode-endpoint <URL>', 'the endpoint that serves the decode load (an OpenAI-compatible server)')
    .option('--prefill-endpoint <URL>', "the other endpoint, where the 'different' variant's prefills go")
    .option('--sim', 'run against two simulated engines started in this process instead')
    .option(
      '--speed <X>',
      withDefault('--sim: the engines run X times faster than real time', BENCH_INTERFERENCE_DEFAULTS.simSpeed),
    )
    .option('--model <M>', withDefault('the model to ask for', 'the first the decode endpoint lists'))
    .option('--prefill-sizes <N,…>', withDefault('cold prefill sizes, tokens', INTERFERENCE_PREFILL_TOKENS.join(',')))
    .option('--variants <V,…>', withDefault('same, different', INTERFERENCE_VARIANTS.join(',')))
    .option('--duration <S>', withDefault('seconds of decode load per cell', s.durationS))
    .option('--decode-rate <R>', withDefault('decode requests per second', s.decodeRate))
    .option('--injections <N>', withDefault('cold prefills per cell', s.injections))
    .option('--every <S>', withDefault('seconds between one prefill answering and the next', s.injectionEveryS))
    .option('--eos', "let engines stop at EOS: don't send vLLM's ignore_eos (for engines that reject it)")
    .option('--json', 'print the cells as JSON');
  example(interference, 'kvroute bench interference --sim --speed 5 --prefill-sizes 8192');
  runs(interference, async () => (await import('./bench-verb.js')).benchInterferenceVerb);
}
