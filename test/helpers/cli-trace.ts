/**
 * The built CLI (dist/cli.js) run as a child process, and a temporary directory holding a trace
 * made by `kvroute trace synth`, created before a test file's tests and removed after them.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, expect } from 'vitest';

const cli = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

/** Runs `kvroute ARGS` to completion (60 s at most), its output as text. */
export const kvroute = (args: string[]) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000 });

/** A fresh directory and the path of the trace `trace synth SYNTH…` writes into it (in beforeAll). */
export function synthTraceDir(prefix: string, synth: string[]): { dir: string; traceFile: string } {
  const dir = mkdtempSync(join(tmpdir(), `kvroute-${prefix}-`));
  const traceFile = join(dir, 'trace.jsonl');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  beforeAll(() => {
    const made = kvroute(['trace', 'synth', ...synth, '-o', traceFile]);
    expect(made.status, made.stderr).toBe(0);
  });
  return { dir, traceFile };
}
