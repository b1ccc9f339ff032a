/** Shared pieces of the `kvroute` verbs: usage errors and option parsing that names the flag. */
import { readFileSync } from 'node:fs';

import { parsePolicyArg } from '../core/policy-arg.js';
import type { PolicyName, PolicySpec } from '../core/types.js';

/** A mistake in how the command was called: printed without a stack, exit status 2. */
export class UsageError extends Error {}

/**
 * The run was stopped by SIGINT or SIGTERM before it finished: what it wrote is partial. The
 * message says what was kept; the exit status is 128 + the signal's number, as a shell reports
 * it (130 for SIGINT, 143 for SIGTERM).
 */
export class InterruptedError extends Error {
  constructor(
    message: string,
    readonly signal: NodeJS.Signals = 'SIGINT',
  ) {
    super(message);
  }
}

export type OptionValues = Record<string, string | boolean | undefined>;

/**
 * The whole input of a verb that reads FILE, or stdin when FILE is absent or `-`. `verb` and
 * `what` name the verb and what it expected, for the messages. A terminal on stdin with no FILE
 * is refused with `example` rather than waited on in silence.
 */
export function readInput(file: string | undefined, usage: { verb: string; what: string; example: string }): string {
  if (file === undefined || file === '-') {
    if (file === undefined && process.stdin.isTTY === true)
      throw new UsageError(
        `${usage.verb} reads ${usage.what} from FILE or from stdin, and stdin is a terminal; e.g. ${usage.example}`,
      );
    return readFileSync(0, 'utf8');
  }
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : 'cannot be read';
    throw new UsageError(
      `${usage.verb} expected ${usage.what} at ${file}: ${reason} (${code ?? (error as Error).message})`,
    );
  }
}

/** `--name X`: its text, or undefined when the flag is absent. */
export function stringFlag(values: OptionValues, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

const INTEGER_KINDS: Record<number, string> = { 0: 'a non-negative integer', 1: 'a positive integer' };

/** `--name N`: an integer ≥ `min`, or undefined when the flag is absent. */
export function integerFlag(values: OptionValues, name: string, min: number): number | undefined {
  const raw = stringFlag(values, name);
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!/^-?\d+$/.test(raw) || !Number.isSafeInteger(value) || value < min)
    throw new UsageError(`--${name} must be ${INTEGER_KINDS[min] ?? `an integer ≥ ${min}`}, got ${raw}`);
  return value;
}

/** `--name X`: a finite number > 0 (or ≥ 0 with `allowZero`). */
export function numberFlag(values: OptionValues, name: string, allowZero = false): number | undefined {
  const raw = stringFlag(values, name);
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(value) || value < 0 || (!allowZero && value === 0))
    throw new UsageError(`--${name} must be a ${allowZero ? 'non-negative' : 'positive'} number, got ${raw}`);
  return value;
}

/**
 * `--name X`: a multiplier, a finite number > 0 and ≤ `max`. The message says which of the
 * three it is not: `--kv-capacity must be greater than 0, got -1`.
 */
export function multiplierFlag(values: OptionValues, name: string, max: number): number | undefined {
  const raw = stringFlag(values, name);
  if (raw === undefined) return undefined;
  const value = Number(raw);
  const fail = (reason: string): never => {
    throw new UsageError(`--${name} must be ${reason}, got ${raw}`);
  };
  if (raw.trim() === '' || Number.isNaN(value)) fail('a number (a multiplier such as 1.3)');
  if (!Number.isFinite(value)) fail('finite');
  if (value <= 0) fail('greater than 0');
  if (value > max) fail(`at most ${max}`);
  return value;
}

/** `--name A`: one of `choices`. */
/** `--policy`: NAME or NAME:KEY=VALUE… (core/policy-arg.ts); undefined when not given. */
export function policyFlag(values: OptionValues): PolicyName | PolicySpec | undefined {
  const raw = stringFlag(values, 'policy');
  return raw === undefined ? undefined : parsePolicyArg(raw, '--policy');
}

export function choiceFlag<T extends string>(values: OptionValues, name: string, choices: readonly T[]): T | undefined {
  const raw = stringFlag(values, name);
  if (raw === undefined) return undefined;
  if (!choices.includes(raw as T)) throw new UsageError(`--${name} must be one of ${choices.join(', ')}, got ${raw}`);
  return raw as T;
}

/**
 * Resolves on SIGINT, SIGTERM or `signal` aborting, whichever comes first, with the signal
 * received (undefined when `signal` aborted); removes its listeners.
 */
export function untilStopped(signal?: AbortSignal): Promise<NodeJS.Signals | undefined> {
  return new Promise((resolve) => {
    const stop = (by?: NodeJS.Signals): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      signal?.removeEventListener('abort', onAbort);
      resolve(by);
    };
    const onAbort = (): void => stop();
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    if (signal?.aborted) stop();
    else signal?.addEventListener('abort', onAbort);
  });
}
