/**
 * The `kvroute` command line, declared with commander. Why commander: no dependencies and a
 * quick load; nested sub-commands (`kvroute trace synth`); "Did you mean" suggestions for an
 * unknown option or command; help per command with its defaults; exitOverride, so kvroute keeps
 * its own exit statuses; widely used and maintained. Version 14: 15 needs Node 22.
 *
 * Invariants:
 * - This module and the *-command.ts files it registers load no verb implementation (they are
 *   imported by every run, `kvroute --help` included); each verb's action imports its module.
 * - Commander never exits the process: every outcome, help and version included, is thrown as a
 *   CommanderError for src/cli.ts to turn into an exit status.
 * - Commander's own error messages are printed as `kvroute <verb>: <message>`, the prefix every
 *   failure of the verb gets, followed by a pointer to the help of the command that failed.
 */
import { Command } from 'commander';

import { addAnalyzeCommand } from './analyze-command.js';
import { addBenchCommand } from './bench-command.js';
import { addExplainCommand } from './explain-command.js';
import { addHashCommand } from './hash-command.js';
import { addReportCommand } from './report-command.js';
import { addReplayCommand } from './replay-command.js';
import { addEventsCommand } from './events-command.js';
import { addServeCommand } from './serve-command.js';
import { addSimCommand } from './sim-command.js';
import { addStateCommand } from './state-command.js';
import { addSweepCommand } from './sweep-command.js';
import { addTraceCommand } from './trace-command.js';
import { addTuneCommand } from './tune-command.js';

/** The labels of the experiments kvroute reproduces, as its help texts use them. */
const EXPERIMENT_LABELS = /\bB[123]′?(?![\w-])|cmp_es|\bw600\b|\bES\b|\bes[01]\b|reference experiments/;

export interface Cli {
  program: Command;
  /** `kvroute <verb>: ` once a verb was recognised, else `kvroute: `: what failure messages start with. */
  prefix(): string;
}

export function createCli(version: string): Cli {
  let verb: string | undefined;
  const prefix = (): string => (verb === undefined ? 'kvroute: ' : `kvroute ${verb}: `);
  const program = new Command('kvroute')
    .description(`kvroute ${version}: cache-aware request routing for LLM inference fleets`)
    .usage('<verb> [options]')
    .version(version, '-v, --version', 'print the version')
    .helpOption('-h, --help', 'print this help')
    .helpCommand('help [verb...]', 'print the help of a verb or sub-verb')
    // Settings made before the verbs are added are inherited by every verb and sub-verb.
    .exitOverride()
    .configureOutput({ outputError: (text, write) => write(`${prefix()}${oneLine(text)}\n`) })
    .showHelpAfterError(`See 'kvroute --help'.`);
  program.hook('preSubcommand', (_program, command) => {
    verb = command.name();
  });
  const verbs = [
    addHashCommand,
    addTraceCommand,
    addAnalyzeCommand,
    addSimCommand,
    addReplayCommand,
    addSweepCommand,
    addTuneCommand,
    addExplainCommand,
    addBenchCommand,
    addReportCommand,
    addStateCommand,
    addEventsCommand,
    addServeCommand,
  ];
  for (const add of verbs) add(program);
  // A help that uses an experiment's label says where the labels are defined.
  program.addHelpText('afterAll', ({ command }) =>
    EXPERIMENT_LABELS.test(command.helpInformation())
      ? '\nB1′, B2, B3, ES (es0, es1), cmp_es, w600, "the reference experiments": defined in docs/glossary.md.'
      : '',
  );
  program.addHelpText(
    'after',
    `
Every verb and sub-verb has its own help: kvroute trace --help, kvroute trace synth --help.
Exit status: 0 success; 1 bad data (a trace line that fails validation); 2 bad usage; 130 or 143 interrupted (SIGINT, SIGTERM).

Example:
  $ echo "hello world" | kvroute hash --chunk-bytes 4`,
  );
  return { program, prefix };
}

/** Commander's "error: unknown option '--x'\n(Did you mean --y?)" as one line without "error: ". */
function oneLine(text: string): string {
  return text
    .replace(/^error: /, '')
    .trim()
    .replaceAll('\n', ' ');
}

/**
 * The command line with `help A B` turned into `A B --help`: commander's help command reaches one
 * level (`help trace`), this reaches the sub-verbs (`help trace synth`). From the first name that
 * is no command on, the rest is dropped, so commander reports that name with its suggestion.
 */
export function expandHelp(program: Command, argv: readonly string[]): string[] {
  if (argv[0] !== 'help') return withoutHelpAfterUnknownVerb(program, argv);
  const names = argv.slice(1);
  let command = program;
  for (const [i, name] of names.entries()) {
    const sub = command.commands.find((c) => c.name() === name);
    if (sub === undefined) return names.slice(0, i + 1);
    command = sub;
  }
  return [...names, '--help'];
}

/**
 * The command line without its --help when it names a verb that does not exist
 * (`kvroute events relay --help`): commander would print the parent's help and exit 0; without
 * the flag it reports the unknown verb, with its suggestion, and exits 2.
 */
function withoutHelpAfterUnknownVerb(program: Command, argv: readonly string[]): string[] {
  let command = program;
  for (const word of argv) {
    if (word.startsWith('-')) break;
    const sub = command.commands.find((c) => c.name() === word || c.aliases().includes(word));
    if (sub === undefined) {
      const takesVerb = command.commands.length > 0 && command.registeredArguments.length === 0;
      return takesVerb ? argv.filter((w) => w !== '--help' && w !== '-h') : [...argv];
    }
    command = sub;
  }
  return [...argv];
}
