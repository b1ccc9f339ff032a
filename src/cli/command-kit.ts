/**
 * How every `kvroute` verb and sub-verb is declared on commander (src/cli/program.ts).
 *
 * Invariants:
 * - Declaring a verb loads nothing of its implementation: the action imports the verb's module
 *   when it runs, so `kvroute --help` and `kvroute hash` never load the proxy or the simulator.
 * - Commander applies no defaults. A default is shown in the help text only, and the
 *   implementation applies it, so the implementation sees exactly the flags the user typed (serve
 *   relies on that: a flag beats KVROUTE_* variables, which beat the YAML file).
 * - The implementation gets the options keyed by flag name (`--block-size` → 'block-size'), as
 *   node:util parseArgs gave them, so the flag helpers of common.ts name the flag in messages.
 * - Every help ends with an example.
 */
import { Option, type Command } from 'commander';

import type { OptionValues } from './common.js';

/** A verb's implementation: the options the user gave and the command's operands. */
export type VerbRun = (values: OptionValues, operands: string[]) => void | Promise<void>;

/** `kvroute trace synth`, for a command at any depth. */
export function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c !== null; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/**
 * A sub-command of `parent`. Settings made on the program before its verbs were added (exit
 * override, output, suggestions) are inherited; the hint after a usage error names this command.
 */
export function subcommand(parent: Command, name: string, description: string): Command {
  const command = parent.command(name).description(description);
  return command.showHelpAfterError(`See '${commandPath(command)} --help'.`);
}

/** The help text of a flag whose default the implementation applies. */
export function withDefault(text: string, value: string | number): string {
  return `${text} (default: ${value})`;
}

/** The options under their own heading in the help, after the command's own. */
export function addOptionGroup(
  command: Command,
  heading: string,
  options: ReadonlyArray<readonly [string, string]>,
): Command {
  for (const [flags, description] of options) command.addOption(new Option(flags, description).helpGroup(heading));
  return command;
}

/** Ends the command's help with one example (a line per shell command). */
export function example(command: Command, ...lines: string[]): Command {
  return command.addHelpText('after', `\nExample:\n${lines.map((line) => `  $ ${line}`).join('\n')}`);
}

/** Runs the verb `load` resolves to, importing its module only now. */
export function runs(command: Command, load: () => Promise<VerbRun>): Command {
  return command.action(async (...params: unknown[]) => {
    const self = params[params.length - 1] as Command;
    const run = await load();
    await run(givenOptions(self), self.args);
  });
}

/** The options given on the command line, keyed by long flag name without the dashes. */
export function givenOptions(command: Command): OptionValues {
  const values: OptionValues = {};
  for (const option of command.options) {
    const value: unknown = command.getOptionValue(option.attributeName());
    if (option.long !== undefined && (typeof value === 'string' || typeof value === 'boolean'))
      values[option.long.slice(2)] = value;
  }
  return values;
}
