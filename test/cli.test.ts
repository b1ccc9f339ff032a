/** The `kvroute` command, run as a user would: built, in a child process. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { hashPrompt, promptText } from '../src/index.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const kvroute = (args: string[], input?: string) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', input, timeout: 30_000 });

describe('kvroute', () => {
  it('prints help and version', () => {
    expect(kvroute(['--help'])).toMatchObject({ status: 0 });
    expect(kvroute(['--help']).stdout).toContain('hash [options] [FILE]');
    expect(kvroute(['--version']).stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
    expect(kvroute([])).toMatchObject({ status: 2 });
  });

  it('hash prints the ids the router computes, for text and for request bodies', () => {
    const text = 'The quick brown fox jumps over the lazy dog. '.repeat(10);
    const out = kvroute(['hash'], text);
    expect(out.status).toBe(0);
    expect(out.stdout.trim().split('\n')).toEqual(Array.from(hashPrompt(text), String));

    const messages = [{ role: 'user', content: text }];
    const chat = kvroute(['hash', '--json', '--chunk-bytes', '64'], JSON.stringify({ model: 'm', messages }));
    const parsed = JSON.parse(chat.stdout);
    expect(parsed.chunkBytes).toBe(64);
    expect(parsed.ids).toEqual(Array.from(hashPrompt(promptText(messages), { chunkBytes: 64 }), String));

    const dir = mkdtempSync(join(tmpdir(), 'kvroute-cli-'));
    try {
      writeFileSync(join(dir, 'body.json'), JSON.stringify({ prompt: 'hello' }));
      expect(kvroute(['hash', join(dir, 'body.json')]).stdout.trim()).toBe(String(hashPrompt('hello')[0]));
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  it.each([
    [['frobnicate'], "kvroute: unknown command 'frobnicate'"],
    [['hash', '--chunk-bytes', '0'], '--chunk-bytes must be a positive integer, got 0'],
    [['hash', '--chunk-bytes', 'x'], '--chunk-bytes must be a positive integer, got x'],
    [['hash', '--colour'], "kvroute hash: unknown option '--colour'"],
    [
      ['hash', '/no/such/file'],
      'hash expected a prompt (plain text or an OpenAI request body) at /no/such/file: no such file (ENOENT)',
    ],
    [['hash', 'a', 'b'], "too many arguments for 'hash'"],
  ])('refuses %j with a clear message and exit code 2', (args, message) => {
    const out = kvroute(args, '');
    expect(out.status).toBe(2);
    expect(out.stderr).toContain(message);
  });

  it('refuses a JSON body without messages or prompt, and a malformed message', () => {
    expect(kvroute(['hash'], '{"model": "m"}').stderr).toContain('needs "messages"');
    const bad = kvroute(['hash'], JSON.stringify({ messages: [{ content: 'x' }] }));
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('messages[0].role must be a string');
  });
});

describe('examples/embed.mjs', () => {
  it('runs and routes the conversation back to its instance', () => {
    const example = fileURLToPath(new URL('../examples/embed.mjs', import.meta.url));
    const out = spawnSync(process.execPath, [example], { encoding: 'utf8', timeout: 30_000 });
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    const lines = out.stdout.split('\n');
    // The default policy, min_ttft: a near-tie spread first, then the conversation's own engine.
    expect(lines[0]).toBe('turn 1: http://10.0.0.3:8000 (spread)');
    expect(lines[1]).toBe('turn 2: http://10.0.0.3:8000 (min_ttft)');
    expect(lines[2]).toBe('turn 3: http://10.0.0.3:8000 (min_ttft)');
  });
});
