/**
 * The `kvroute` command line as a user explores it, through the built CLI: every verb and
 * sub-verb answers --help and -h, --version, suggestions for misspelled options and commands,
 * exit statuses, and a start that loads no verb it does not run.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';

import { createCli } from '../src/cli/program.js';
import { REORDER_WINDOW_DEFAULT, TIME_UNITS } from '../src/trace/read-trace.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const moduleLog = fileURLToPath(new URL('./fixtures/module-log.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvroute-cli-help-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const kvroute = (args: string[], input = '') =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', input, timeout: 30_000 });

/** Every command under `command`, depth first, with its path below the program. */
function commands(command: Command, path: string[] = []): Array<{ path: string[]; command: Command }> {
  return command.commands.flatMap((sub) => {
    const subPath = [...path, sub.name()];
    return [{ path: subPath, command: sub }, ...commands(sub, subPath)];
  });
}

const { program } = createCli('0.0.0');
const all = commands(program);

describe('kvroute --help', () => {
  it('knows every verb and sub-verb', () => {
    expect(all.map((c) => c.path.join(' ')).sort()).toEqual(
      [
        'analyze',
        'analyze compare',
        'analyze run',
        'analyze trace',
        'bench',
        'bench interference',
        'events',
        'events relay',
        'explain',
        'hash',
        'report',
        'replay',
        'serve',
        'sim',
        'sim breakeven',
        'sim interference',
        'sim run',
        'sim serve',
        'state',
        'state freshness',
        'state publish',
        'state watch',
        'sweep',
        'trace',
        'trace synth',
        'trace transform',
        'trace validate',
        'tune',
      ].sort(),
    );
  });

  it('lists the verbs, exit 0', () => {
    const help = kvroute(['--help']);
    expect(help.status).toBe(0);
    for (const verb of program.commands) expect(help.stdout).toMatch(new RegExp(`^  ${verb.name()}\\b`, 'm'));
    expect(help.stdout).toContain('Example');
  });

  it.each(all.map((c) => [c.path.join(' '), c] as const))(
    '%s: --help and -h print the usage, every option and an example on stdout, exit 0',
    (_name, { path, command }) => {
      const long = kvroute([...path, '--help']);
      expect(long.status).toBe(0);
      expect(long.stderr).toBe('');
      expect(long.stdout).toContain(`Usage: kvroute ${path.join(' ')}`);
      for (const option of command.options) expect(long.stdout).toContain(option.long);
      for (const sub of command.commands) expect(long.stdout).toMatch(new RegExp(`^  ${sub.name()}\\b`, 'm'));
      expect(long.stdout).toMatch(/\nExample:\n {2}\$ .*\bkvroute /);
      expect(kvroute([...path, '-h'])).toMatchObject({ status: 0, stdout: long.stdout });
      expect(kvroute(['help', ...path])).toMatchObject({ status: 0, stdout: long.stdout });
    },
  );

  it('shows defaults, and the trace reader options as the reader has them', () => {
    expect(kvroute(['hash', '--help']).stdout).toMatch(/--chunk-bytes <N>\s+bytes per block \(default: 128\)/);
    const validate = kvroute(['trace', 'validate', '--help']).stdout;
    expect(validate).toContain(`--time-unit <${TIME_UNITS.join('|')}>`);
    expect(validate).toMatch(new RegExp(`--reorder-window <N>[^]*\\(default: ${REORDER_WINDOW_DEFAULT}\\)`));
    expect(kvroute(['serve', '--help']).stdout).toMatch(
      /--port <P>\s+listen port \(0: a free port\) \(default: 8000\)/,
    );
  });
});

describe('kvroute usage errors', () => {
  it('--version and -v print the package version', () => {
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    expect(kvroute(['--version'])).toMatchObject({ status: 0, stdout: `${version}\n` });
    expect(kvroute(['-v'])).toMatchObject({ status: 0, stdout: `${version}\n` });
  });

  it.each([
    [['hash', '--chunk-byte', '3'], "kvroute hash: unknown option '--chunk-byte' (Did you mean --chunk-bytes?)"],
    [['trace', 'synth', '--sesions', '3'], "kvroute trace: unknown option '--sesions' (Did you mean --sessions?)"],
    [['hsah'], "kvroute: unknown command 'hsah' (Did you mean hash?)"],
    [['trace', 'sinth'], "kvroute trace: unknown command 'sinth' (Did you mean synth?)"],
    [['help', 'sim', 'rn'], "kvroute sim: unknown command 'rn' (Did you mean run?)"],
  ])('%j suggests the closest, exit 2', (args, message) => {
    const out = kvroute(args);
    expect(out.status).toBe(2);
    expect(out.stdout).toBe('');
    expect(out.stderr.split('\n')[0]).toBe(message);
    expect(out.stderr).toContain(`See 'kvroute `);
  });

  it.each([
    [['trace', 'validate'], "kvroute trace: missing required argument 'IN'"],
    [['sim', 'run'], 'kvroute sim: sim run needs a trace: sim run IN, or --trace IN'],
    [['tune', '--policy', 'unified'], 'kvroute tune: tune needs traces: tune IN[,IN…], or --trace IN[,IN…]'],
    [['state', 'publish', '--shm', 'feed'], 'kvroute state: state publish needs --engines URL[,URL…]'],
    [['hash', '--chunk-bytes'], "kvroute hash: option '--chunk-bytes <N>' argument missing"],
    [['analyze', 'trace', '-', '--workers', '-1'], 'kvroute analyze: --workers must be a non-negative integer, got -1'],
  ])('%j names what is missing or wrong, exit 2', (args, message) => {
    const out = kvroute(args);
    expect(out.status).toBe(2);
    expect(out.stderr.split('\n')[0]).toBe(message);
  });

  it('without a verb or sub-verb prints the usage, exit 2', () => {
    for (const args of [[], ['trace'], ['sim'], ['state'], ['analyze']]) {
      const out = kvroute(args);
      expect(out.status).toBe(2);
      expect(out.stderr).toContain(`Usage: kvroute ${args.join(' ')}`.trim());
    }
  });

  it('bad data exits 1, naming the file and line', () => {
    const bad = join(dir, 'malformed.jsonl');
    writeFileSync(bad, '{"timestamp": 0, "input_length": 16, "output_length": 1, "hash_ids": [1]}\n{"timestamp": \n');
    const out = kvroute(['trace', 'validate', bad]);
    expect(out.status).toBe(1);
    expect(out.stderr).toMatch(new RegExp(`^kvroute trace: ${bad}:line 2: malformed JSON`));
  });
});

describe('kvroute start-up', () => {
  /** The modules under dist/ and node_modules/ that `kvroute args` imports. */
  function loaded(args: string[], input = ''): string[] {
    const log = join(dir, `modules-${args.join('-')}.txt`);
    const run = spawnSync(process.execPath, ['--import', moduleLog, cli, ...args], {
      encoding: 'utf8',
      input,
      env: { ...process.env, KVROUTE_MODULE_LOG: log },
      timeout: 30_000,
    });
    expect(run.status).toBe(0);
    return readFileSync(log, 'utf8').split('\n');
  }
  // proxy-options, backend-spec, session-headers and tracing-options are the proxy's option checks (serve's --help defaults), light by design.
  const HEAVY =
    /\/(proxy\/(?!proxy-options|upstream\/backend-spec|upstream\/dns-discovery|upstream\/discovered-backends|upstream\/discovery-events|exchange\/session-headers|observe\/tracing-options)|sim\/(?!engine-preset|sim-fleet-defaults|interference-protocol)|analysis\/|state\/|report\/)|piscina|uWebSockets|yaml|undici|vega/;

  it('--help and hash load no verb they do not run: no proxy, simulator, analysis, state feed or report charts', () => {
    const help = loaded(['--help']);
    expect(help.some((url) => url.endsWith('/dist/cli/program.js'))).toBe(true);
    expect(help.filter((url) => HEAVY.test(url) || url.endsWith('-verb.js'))).toEqual([]);
    const hash = loaded(['hash'], 'hi\n');
    expect(hash.some((url) => url.endsWith('/dist/cli/hash-verb.js'))).toBe(true);
    expect(hash.filter((url) => HEAVY.test(url) || (/-verb\.js$/.test(url) && !url.endsWith('/hash-verb.js')))).toEqual(
      [],
    );
  });
});
