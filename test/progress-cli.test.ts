/**
 * The progress line through the built CLI: absent when stderr is not a terminal, drawn and then
 * cleared under a pseudo-terminal (util-linux `script`), never on stdout, and cleared before an
 * error message.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvroute-progress-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const CLEAR_LINE = '\u001b[2K';
const ESC = '\u001b';

const quote = (arg: string): string => `'${arg.replace(/'/g, `'\\''`)}'`;

/** The CLI with pipes for stdin, stdout and stderr: no terminal anywhere. */
function piped(args: string[]) {
  return spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 30_000 });
}

/**
 * The CLI on a pseudo-terminal: `script` runs `command` (a shell line, so stdout can be sent
 * elsewhere) and copies what reached the terminal to its own stdout.
 */
function onTerminal(args: string[], redirect = '') {
  const command = `${[process.execPath, cli, ...args].map(quote).join(' ')}${redirect}`;
  return spawnSync('script', ['-qec', command, '/dev/null'], { encoding: 'utf8', timeout: 30_000 });
}

describe('the progress line from the CLI', () => {
  const plain = join(dir, 'plain.jsonl');
  const drawn = join(dir, 'drawn.jsonl');

  it('prints nothing extra when stderr is not a terminal', () => {
    const run = piped(['trace', 'synth', '--sessions', '50', '--seed', '2', '-o', plain]);
    expect(run.status).toBe(0);
    expect(run.stderr).toMatch(/^kvroute trace synth: wrote \d+ requests to \S+\n$/);
    expect(run.stderr).not.toContain(ESC);
    expect(run.stdout).toBe('');
  });

  it('draws a bar on a terminal, clears it before the final line, and writes the same trace', () => {
    const run = onTerminal(['trace', 'synth', '--sessions', '50', '--seed', '2', '-o', drawn]);
    expect(run.status).toBe(0);
    const screen = run.stdout;
    expect(screen).toMatch(/trace synth .*\d+% · [\d.]+( k)? \/ [\d.]+( k)? requests · [\d.]+( k)?\/s · /);
    const cleared = screen.lastIndexOf(CLEAR_LINE);
    expect(cleared).toBeGreaterThan(0);
    expect(screen.slice(cleared + CLEAR_LINE.length)).toMatch(/^kvroute trace synth: wrote \d+ requests to \S+\r?\n$/);
    expect(readFileSync(drawn, 'utf8')).toBe(readFileSync(plain, 'utf8'));
  });

  it('keeps stdout clean in --json mode while the bar is on the terminal', () => {
    const out = join(dir, 'summary.json');
    const run = onTerminal(['analyze', 'trace', plain, '--json', '--workers', '0'], ` > ${quote(out)}`);
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('analyze trace ');
    expect(run.stdout.endsWith(CLEAR_LINE)).toBe(true);
    const json = readFileSync(out, 'utf8');
    expect(json).not.toContain(ESC);
    expect(JSON.parse(json)).toMatchObject({ sessions: 50 });
  });

  it('clears the bar before an error message', () => {
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, `${readFileSync(plain, 'utf8').split('\n')[0]}\n{"session_id": "x"}\n`);
    const run = onTerminal(['trace', 'validate', bad]);
    expect(run.status).toBe(1);
    const screen = run.stdout;
    const cleared = screen.lastIndexOf(CLEAR_LINE);
    expect(cleared).toBeGreaterThan(0);
    expect(screen.slice(cleared + CLEAR_LINE.length)).toMatch(/^kvroute trace: \S+:line 2: .*\r?\n$/);
  });
});
