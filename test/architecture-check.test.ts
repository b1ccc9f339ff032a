/**
 * `npm run check:architecture` can fail: each of its three checks, run over a made-up tree
 * with one violation, exits 1 naming the file and the rule; over a clean tree it exits 0.
 * The checkout itself is checked by `npm run lint` in CI.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const made: string[] = [];
afterAll(() => made.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-arch-'));
  made.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

function run(args: string[], cwd = root) {
  const r = spawnSync(process.execPath, args, { cwd, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

const depcruise = join(root, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
const tsconfig = JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext' } });

describe('check:architecture', () => {
  it('refuses the core importing the command line, and an import cycle', () => {
    const dir = tree({
      'tsconfig.build.json': tsconfig,
      'src/core/router.ts': "import { verb } from '../cli/verb.js';\nexport const route = () => verb;\n",
      'src/cli/verb.ts': "import { route } from '../core/router.js';\nexport const verb = () => route;\n",
    });
    const r = run([depcruise, 'src', '--config', join(root, '.dependency-cruiser.cjs'), '--output-type', 'err'], dir);
    expect(r.status).not.toBe(0);
    expect(r.out).toMatch(/layer-core: src\/core\/router\.ts → src\/cli\/verb\.ts/);
    expect(r.out).toMatch(/no-cli-in-libraries/);
    expect(r.out).toMatch(/no-circular/);
  });

  it('accepts a tree within the rules', () => {
    const dir = tree({
      'tsconfig.build.json': tsconfig,
      'src/core/router.ts': 'export const route = () => 1;\n',
      'src/cli/verb.ts': "import { route } from '../core/router.js';\nexport const verb = () => route;\n",
    });
    const r = run([depcruise, 'src', '--config', join(root, '.dependency-cruiser.cjs'), '--output-type', 'err'], dir);
    expect(r.out).toMatch(/no dependency violations/);
    expect(r.status).toBe(0);
  });

  it('refuses napi.h outside native/bindings/ and a room including one it may not', () => {
    const dir = tree({
      'core/router.cc': '#include <napi.h>\n#include "bindings/js-router.h"\n',
      'bindings/js-router.h': '#include "core/router.h"\n',
      'loose.h': '\n',
    });
    const r = run(['scripts/check-native-rooms.mjs', dir]);
    expect(r.status).toBe(1);
    expect(r.out).toMatch(/core\/router\.cc:1: napi\.h outside native\/bindings\//);
    expect(r.out).toMatch(/core\/router\.cc:2: core\/ may not include bindings\/js-router\.h/);
    expect(r.out).toMatch(/loose\.h: not in a room/);
    expect(run(['scripts/check-native-rooms.mjs', join(root, 'native')]).status).toBe(0);
  });

  it('refuses a long file that does not say why, and accepts one that does', () => {
    const long = 'export const x = 1;\n'.repeat(600);
    const bad = tree({ 'src/core/long.ts': long });
    const r = run(['scripts/check-file-sizes.mjs', bad]);
    expect(r.status).toBe(1);
    expect(r.out).toMatch(/src\/core\/long\.ts: 601 lines/);
    const good = tree({ 'src/core/long.ts': `/**\n * Long file: a table the tests read.\n */\n${long}` });
    expect(run(['scripts/check-file-sizes.mjs', good]).status).toBe(0);
  });
});
