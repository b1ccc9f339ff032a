#!/usr/bin/env node
/**
 * The `kvroute` command. Verbs are nouns of the field; each lives in its own
 * module and registers here. Only implemented verbs are listed.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { hashPrompt, promptText, type ChatMessage } from './index.js';
import { isKvrouteError } from './core/errors.js';

const VERSION: string = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

const USAGE = `kvroute ${VERSION} — cache-aware request routing for LLM inference fleets

usage: kvroute <verb> [options]

verbs:
  hash [FILE|-]     print the chained block ids the router computes for a prompt:
                    plain text, or an OpenAI request body ({"messages": [...]} or {"prompt": "..."})
                    --chunk-bytes N   bytes per block (default 128)
                    --json            print {"bytes", "chunkBytes", "ids": ["<u64>", ...]}

options:
  -h, --help        this text
  -v, --version     the version`;

class UsageError extends Error {}

function readInput(file: string | undefined): string {
  if (file === undefined || file === '-') return readFileSync(0, 'utf8');
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

/** The text a request hashes: a chat body's messages, a completion's prompt, or the input itself. */
function promptOf(input: string): string {
  const trimmed = input.trimStart();
  if (!trimmed.startsWith('{')) return input;
  let body: { messages?: ChatMessage[]; prompt?: unknown };
  try {
    body = JSON.parse(input);
  } catch {
    return input; // text that happens to start with a brace
  }
  if (body.messages !== undefined) return promptText(body.messages, 'messages');
  if (typeof body.prompt === 'string') return body.prompt;
  throw new UsageError('a JSON input needs "messages" (chat) or a string "prompt" (completions)');
}

function hashVerb(args: string[]): void {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { 'chunk-bytes': { type: 'string' }, json: { type: 'boolean' } },
  });
  if (positionals.length > 1) throw new UsageError('hash takes at most one FILE');
  const chunkText = values['chunk-bytes'] ?? '128';
  const chunkBytes = Number(chunkText);
  if (!/^\d+$/.test(chunkText) || chunkBytes < 1)
    throw new UsageError(`--chunk-bytes must be a positive integer, got ${chunkText}`);
  const text = promptOf(readInput(positionals[0]));
  const ids = hashPrompt(text, { chunkBytes });
  if (values.json) {
    const bytes = Buffer.byteLength(text, 'utf8');
    process.stdout.write(`${JSON.stringify({ bytes, chunkBytes, ids: Array.from(ids, String) })}\n`);
  } else {
    process.stdout.write(ids.length === 0 ? '' : `${Array.from(ids).join('\n')}\n`);
  }
}

const VERBS: Record<string, (args: string[]) => void> = { hash: hashVerb };

function main(argv: string[]): number {
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
    run(rest);
    return 0;
  } catch (error) {
    if (
      error instanceof UsageError ||
      isKvrouteError(error) ||
      (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
    ) {
      process.stderr.write(`kvroute ${verb}: ${(error as Error).message}\n`);
      return 2;
    }
    throw error;
  }
}

process.exitCode = main(process.argv.slice(2));
