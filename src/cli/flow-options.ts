/**
 * The flow-control flags `sim run`, `sweep` and `tune` share, declared once under their own
 * heading: `--max-in-flight N`, `--flow FILE`, `--queue-timeout MS` (docs/flow-control.md "In the
 * simulator"). flow-flags.ts reads them back.
 *
 * Loaded by every `kvroute` run (the declarations), so it imports nothing but the command kit:
 * reading a flow file needs yaml, which start-up must not load (test/cli-help.test.ts).
 */
import type { Command } from 'commander';

import { addOptionGroup } from './command-kit.js';

/** The three flags; `what` names the simulations they apply to ("each cell's", …). */
export function addFlowOptions(command: Command, what = 'the'): Command {
  return addOptionGroup(command, 'Flow control (docs/flow-control.md):', [
    [
      '--max-in-flight <N>',
      `route at most N requests at once fleet-wide in ${what} simulation, queue the rest by class and tenant (the trace's priority and tenant)`,
    ],
    ['--flow <FILE>', "flow control's tenants, classes, weights and limits (YAML or JSON; needs --max-in-flight)"],
    ['--queue-timeout <MS>', "with --max-in-flight: a class's deadline when it sets none (default 30000)"],
  ]);
}
