#!/usr/bin/env node
/**
 * The `kvroute` command. Each verb lives in its own module under src/cli/ and registers here.
 * Only implemented verbs are listed.
 *
 * Exit status: 0 success; 1 bad data (a trace line that fails validation); 2 bad usage.
 */
import { readFileSync } from 'node:fs';

import { isKvrouteError } from './core/errors.js';
import { ANALYZE_USAGE, analyzeVerb } from './cli/analyze-verb.js';
import { UsageError } from './cli/common.js';
import { HASH_USAGE, hashVerb } from './cli/hash-verb.js';
import { SERVE_USAGE, serveVerb } from './cli/serve-verb.js';
import { SIM_USAGE, simVerb } from './cli/sim-verb.js';
import { STATE_USAGE, stateVerb } from './cli/state-verb.js';
import { TRACE_USAGE, traceVerb } from './cli/trace-verb.js';

const VERSION: string = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

const USAGE = `kvroute ${VERSION} — cache-aware request routing for LLM inference fleets

usage: kvroute <verb> [options]

verbs:
${HASH_USAGE}
${TRACE_USAGE}
${ANALYZE_USAGE}
${SIM_USAGE}
${STATE_USAGE}
${SERVE_USAGE}

options:
  -h, --help        this text
  -v, --version     the version`;

const VERBS: Record<string, (args: string[]) => void | Promise<void>> = {
  hash: hashVerb,
  trace: traceVerb,
  analyze: analyzeVerb,
  sim: simVerb,
  state: stateVerb,
  serve: serveVerb,
};

/** Data errors: the input is wrong, not the command line. */
const DATA_ERRORS = new Set([
  'ERR_KVROUTE_TRACE_FORMAT',
  'ERR_KVROUTE_TRACE_IO',
  'ERR_KVROUTE_TRACE_EMPTY',
  'ERR_KVROUTE_STATE_FEED',
]);

async function main(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === '-h' || verb === '--help' || verb === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return verb === undefined ? 2 : 0;
  }
  if (verb === '-v' || verb === '--version') {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const run = VERBS[verb];
  if (run === undefined) {
    process.stderr.write(`kvroute: unknown verb "${verb}"; known: ${Object.keys(VERBS).join(', ')} (kvroute --help)\n`);
    return 2;
  }
  try {
    await run(rest);
    return 0;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (error instanceof UsageError || isKvrouteError(error) || code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`kvroute ${verb}: ${(error as Error).message}\n`);
      return code !== undefined && DATA_ERRORS.has(code) ? 1 : 2;
    }
    throw error;
  }
}

// stdout closed early (`kvroute trace synth | head`) is not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

process.exitCode = await main(process.argv.slice(2));
