/**
 * The docs hold to the code (issue 29, "docs drift"): the README's first shell block runs as
 * pasted at the checkout's root; docs/tune.md lists the tunables `kvroute tune --help` lists;
 * docs/proxy.md gives the upstream client's real default; `explain` follows the default policy;
 * no doc, help text or CLI file points to files outside the repository (DESIGN.md, ../shared);
 * every doc that uses an experiment's label links the glossary that defines it.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';

import { createCli } from '../src/cli/program.js';
import { DEFAULT_POLICY, TUNABLE_NAMES } from '../src/core/policy-spec.js';

const ROOT = resolve(import.meta.dirname, '..');
const CLI = join(ROOT, 'dist/cli.js');
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
const docs = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const kvroute = (args: string[], input?: string) =>
  spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', input, timeout: 30_000 });

function helps(command: Command, path: string[] = []): string[] {
  const own = kvroute([...path, '--help']).stdout;
  return [own, ...command.commands.filter((c) => c.name() !== 'help').flatMap((c) => helps(c, [...path, c.name()]))];
}

describe('the docs', () => {
  it("README's first ```sh block runs as pasted at the checkout's root", () => {
    const block = /^```sh\n([\s\S]*?)^```$/m.exec(read('README.md'))?.[1];
    expect(block).toBeDefined();
    const run = spawnSync('bash', ['-e', '-c', block!], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
    expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
  }, 130_000);

  it('docs/tune.md lists exactly the tunables of kvroute tune --help, in its order', () => {
    const help = kvroute(['tune', '--help']).stdout;
    const fromHelp = [...help.matchAll(/^ {2}(\w+) +(?:number|integer) in /gm)].map((m) => m[1]);
    const fromDoc = [...read('docs/tune.md').matchAll(/^\| `(\w+)` +\| (?:number|integer) in /gm)].map((m) => m[1]);
    expect(fromHelp).toEqual([...TUNABLE_NAMES]);
    expect(fromDoc).toEqual(fromHelp);
  });

  it("docs/proxy.md gives the upstream client's default that kvroute serve --help gives", () => {
    const help = kvroute(['serve', '--help']).stdout.replaceAll(/\s+/g, ' ');
    const given = /--upstream <C> [^(]*\(default: (\w+)\)/.exec(help)?.[1];
    expect(given).toBeDefined();
    const row = read('docs/proxy.md')
      .split('\n')
      .find((line) => line.startsWith('| `--upstream C`'));
    expect(row?.split('|')[4]?.trim()).toBe(`\`${given}\``);
  });

  it('explain without a policy uses the default policy', () => {
    const scenario = JSON.stringify({ instances: [{ id: 'a' }, { id: 'b' }], request: { inputTokens: 100 } });
    expect(kvroute(['explain'], scenario).stdout).toContain(`policy:     ${DEFAULT_POLICY}\n`);
    expect(kvroute(['explain', '--help']).stdout).toContain(`else ${DEFAULT_POLICY})`);
  });

  it('sweep --help shows the default policy among the default --policies', () => {
    expect(kvroute(['sweep', '--help']).stdout.replaceAll(/\s+/g, ' ')).toMatch(
      new RegExp(`--policies .*\\(default: [^)]*\\b${DEFAULT_POLICY}\\b`),
    );
  });

  it('point to nothing outside the repository (no DESIGN.md, no ../shared); a help using a label names the glossary', () => {
    const outside = /DESIGN\.md|\.\.\/shared|\/work\/shared|REFERENCE\.md|microbench_ANALYSIS|window_1_results/;
    const cliFiles = readdirSync(join(ROOT, 'src/cli'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `src/cli/${f}`);
    for (const file of [...docs, ...cliFiles]) expect(read(file), file).not.toMatch(outside);
    const labels = /\bB[123]′?(?![\w-])|cmp_es|\bw600\b|\bES\b/;
    for (const help of helps(createCli('0').program)) {
      expect(help).not.toMatch(outside);
      if (labels.test(help)) expect(help).toContain('docs/glossary.md');
    }
  }, 60_000);

  it('link the glossary wherever they use an experiment label, and say "the seeds" nowhere', () => {
    const labels = /\bB[123]′?(?![\w-])|cmp_es|\bw600\b|\bES ablation\b/;
    for (const file of docs.filter((f) => f !== 'docs/glossary.md')) {
      const text = read(file);
      if (labels.test(text)) expect(text, file).toContain('glossary.md');
      expect(text, file).not.toMatch(/the seeds/i);
    }
  });
});
