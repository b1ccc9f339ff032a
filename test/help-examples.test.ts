/**
 * Every example in every `kvroute … --help` runs as printed, in an empty directory where only the
 * shipped data/ and examples/ exist and `kvroute` is the built CLI: each Example block is one
 * shell script, bounded in time. A block that ends must exit 0; one whose last command serves
 * forever (serve, sim serve, events relay, state watch, state publish) must still be running after a few
 * seconds. Every process a block started is stopped with its process group.
 *
 * Hazard: the examples use fixed loopback ports (8000, 8101, 8102, 5557, 5567, 5600, NATS's 4222); a test elsewhere
 * holding one of them at the same moment makes a block fail.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import type { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';

import { createCli } from '../src/cli/program.js';

const ROOT = resolve(import.meta.dirname, '..');
const CLI = join(ROOT, 'dist/cli.js');
/** How long a block that ends may take, and how long one that serves must have stayed up. */
const END_MS = 90_000;
const SERVE_MS = 4_000;

function commandPaths(command: Command, path: string[] = []): string[][] {
  return [
    path,
    ...command.commands.filter((c) => c.name() !== 'help').flatMap((c) => commandPaths(c, [...path, c.name()])),
  ];
}

/** Each "Example:" block of a help text, its `$ ` lines joined into one script. */
function exampleBlocks(help: string): string[] {
  return help
    .split(/^Example:\n/m)
    .slice(1)
    .map((block) =>
      block
        .split('\n')
        .filter((line) => line.startsWith('  $ '))
        .map((line) => line.slice(4))
        .join('\n'),
    )
    .filter((script) => script !== '');
}

const examples: Array<[string, string]> = [];
for (const path of commandPaths(createCli('0').program)) {
  const help = spawnSync(process.execPath, [CLI, ...path, '--help'], { encoding: 'utf8' }).stdout;
  for (const script of exampleBlocks(help)) examples.push([['kvroute', ...path].join(' '), script]);
}

const serves = (script: string): boolean => {
  const last = script.trim().split('\n').at(-1)!;
  return /kvroute (serve|sim serve|events relay|state publish(?!.*--rounds)|state watch(?!.*--once))\b/.test(last);
};

const sandbox = mkdtempSync(join(tmpdir(), 'kvroute-examples-'));
const bin = join(sandbox, 'bin');
mkdirSync(bin);
writeFileSync(join(bin, 'kvroute'), `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
chmodSync(join(bin, 'kvroute'), 0o755);
afterAll(() => rmSync(sandbox, { recursive: true, force: true }));

/** Runs `script` in a fresh directory with data/ and examples/; resolves how it ended. */
function runBlock(script: string, limitMs: number): Promise<{ code: number | null; running: boolean; output: string }> {
  const dir = mkdtempSync(join(sandbox, 'run-'));
  for (const shipped of ['data', 'examples']) symlinkSync(join(ROOT, shipped), join(dir, shipped));
  const feed = `kvroute-feed`;
  const child = spawn('bash', ['-c', `set -e\n${script}`], {
    cwd: dir,
    detached: true,
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  return new Promise((done) => {
    const timer = setTimeout(() => finish(null, true), limitMs);
    const finish = (code: number | null, running: boolean): void => {
      clearTimeout(timer);
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        // the group is gone already
      }
      rmSync(join('/dev/shm', feed), { force: true });
      done({ code, running, output });
    };
    child.once('exit', (code) => finish(code, false));
  });
}

describe('every --help example', () => {
  it('is found: at least one per verb', () => {
    expect(examples.length).toBeGreaterThan(20);
  });

  it.each(examples)(
    '%s: %s',
    async (_command, script) => {
      const long = serves(script);
      const { code, running, output } = await runBlock(script, long ? SERVE_MS : END_MS);
      if (long) expect(running || code === 0, output).toBe(true);
      else {
        expect(running, `still running after ${END_MS} ms:\n${output}`).toBe(false);
        expect(code, output).toBe(0);
      }
    },
    END_MS + 10_000,
  );
});
