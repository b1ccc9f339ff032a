/**
 * The addon's typed-array layouts (native/bindings/js-layout.h, exported as `layout`) against
 * src/core/core-router.ts's: the loader refuses a mismatch, naming the field, instead of letting a
 * route() misread its request slab or decision array. The last case runs the built library (dist/).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { CORE_LAYOUT, layoutMismatch } from '../src/core/core-router.js';
import { loadNative, nativePath } from '../src/core/native.js';

describe('native buffer layouts', () => {
  it('the loaded addon exports every layout constant, equal to core-router.ts', () => {
    const { layout } = loadNative();
    expect(layoutMismatch(layout)).toBeNull();
    expect(Object.keys(layout).sort()).toEqual(Object.keys(CORE_LAYOUT).sort());
  });

  it('names a changed offset, a missing field and a reordered stat', () => {
    const layout: Record<string, unknown> = JSON.parse(JSON.stringify(CORE_LAYOUT));
    layout.DECISION_REASON = 7;
    delete layout.OFFLOAD_FIELDS;
    layout.Stat = { ...(layout.Stat as object), Blocks: 2, Segments: 1 };
    expect(layoutMismatch(layout)).toBe(
      'DECISION_REASON: addon 7, TypeScript 1; OFFLOAD_FIELDS: addon none, TypeScript 4; ' +
        'Stat.Blocks: addon 2, TypeScript 1; Stat.Segments: addon 1, TypeScript 2',
    );
    expect(layoutMismatch({ ...CORE_LAYOUT, EXTRA_FIELD: 3 })).toBe('EXTRA_FIELD: addon 3, TypeScript none');
    expect(layoutMismatch(undefined)).toBe('the addon exports no layout (built from older sources)');
  });

  it('the loader refuses an addon whose layout differs, naming the field', () => {
    const real = nativePath();
    expect(real).not.toBeNull();
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-layout-'));
    try {
      // A package with the built library and no addon builds, and a stand-in addon: the real one
      // with one offset moved.
      cpSync(fileURLToPath(new URL('../dist', import.meta.url)), join(dir, 'dist'), { recursive: true });
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'layout-probe', type: 'module' }));
      const fake = join(dir, 'moved-offset.cjs');
      writeFileSync(
        fake,
        `const real = require(${JSON.stringify(real)});\n` +
          `module.exports = { ...real, layout: { ...real.layout, REQUEST_FLAGS: 9 } };\n`,
      );
      const probe =
        `const { loadNative } = await import(${JSON.stringify(join(dir, 'dist', 'core', 'native.js'))});` +
        `try { loadNative(); } catch (error) { console.log(error.code + ' ' + error.message); }`;
      const run = spawnSync(process.execPath, ['--input-type=module', '-e', probe], {
        encoding: 'utf8',
        env: { ...process.env, KVROUTE_ADDON: fake },
      });
      expect(run.stdout).toContain('ERR_KVROUTE_NATIVE_UNAVAILABLE');
      expect(run.stdout).toContain(
        `${fake}: its buffer layouts differ from src/core/core-router.ts (REQUEST_FLAGS: addon 9, TypeScript 1); rebuild it`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
