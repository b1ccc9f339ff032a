/** `kvroute explain`, declared; explain-verb.ts runs it. */
import type { Command } from 'commander';

import { DEFAULT_POLICY } from '../core/policy-spec.js';
import { example, runs, subcommand, withDefault } from './command-kit.js';

export function addExplainCommand(program: Command): void {
  const explain = subcommand(
    program,
    'explain',
    'where a request would go on a described fleet, and why: the reason, the offload decision with both costs, every candidate',
  )
    .argument(
      '[SCENARIO]',
      'a JSON scenario: fleet, state and request (docs/policies.md "kvroute explain"); - or none: stdin',
    )
    .option(
      '--policy <P>',
      withDefault(
        "the policy (NAME or NAME:KEY=VALUE…), instead of the scenario's",
        `the scenario's, else ${DEFAULT_POLICY}`,
      ),
    )
    .option('--json', 'print the explanation as JSON');
  example(explain, 'kvroute explain examples/offload-scenario.json --policy min_ttft+offload');
  runs(explain, async () => (await import('./explain-verb.js')).explainVerb);
}
