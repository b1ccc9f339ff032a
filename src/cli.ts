#!/usr/bin/env node
/**
 * The `kvroute` command. The verbs are declared in src/cli/program.ts (commander); each verb's
 * implementation is imported only when it runs.
 *
 * Exit status: 0 success; 1 bad data (a trace line that fails validation); 2 bad usage
 * (src/cli/exit-status.ts); 130 or 143 interrupted (SIGINT or SIGTERM stopped the run before its end).
 */
import { readFileSync } from 'node:fs';

import { exitStatus } from './cli/exit-status.js';
import { createCli, expandHelp } from './cli/program.js';

const VERSION: string = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

async function main(argv: string[]): Promise<number> {
  const { program, prefix } = createCli(VERSION);
  try {
    await program.parseAsync(expandHelp(program, argv), { from: 'user' });
    return 0;
  } catch (error) {
    return exitStatus(error, prefix());
  }
}

// stdout closed early (`kvroute trace synth | head`) is not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

process.exitCode = await main(process.argv.slice(2));
