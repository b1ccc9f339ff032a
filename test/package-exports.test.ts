/**
 * The package's entries (package.json "exports"): `kvroute` is the routing core alone and loads
 * no server, HTTP client, metrics, ZeroMQ, worker pool or chart library; each other subpath
 * (kvroute/events, /proxy, /sim, /replay, /trace, /tokenize) exports its part and has its types.
 * Each import runs in a fresh node process, by the package's own name (package self-reference),
 * against the built dist/ (test/fixtures/loaded-packages.mjs lists what it loaded).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const probe = fileURLToPath(new URL('./fixtures/loaded-packages.mjs', import.meta.url));

/** Packages the routing core must not load (each costs import time and memory, or a native build). */
const HEAVY = ['uWebSockets.js', 'undici', 'prom-client', 'zeromq', 'piscina', 'vega', 'vega-lite', 'fastify'];

function load(specifier: string): { exports: string[]; packages: string[] } {
  const out = execFileSync(process.execPath, [probe, specifier], { cwd: root, encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').at(-1)!) as { exports: string[]; packages: string[] };
}

const ENTRIES: Record<string, string[]> = {
  kvroute: [
    'Router',
    'hashPrompt',
    'hashTokenBlocks',
    'promptText',
    'POLICY_NAMES',
    'isKvrouteError',
    'ShadowReconciler',
    'CostLearner',
    'DEFAULT_COST_PRIOR',
  ],
  'kvroute/events': ['applyKvEvents', 'subscribeKvEvents', 'subscribeNatsKvEvents'],
  'kvroute/proxy': [
    'createProxy',
    'kvrouteFastify',
    'createProxyMetrics',
    'adminMount',
    'createDashboard',
    'PROXY_DEFAULTS',
    'openAccessLog',
    'formatRecord',
  ],
  'kvroute/sim': ['startSimFleet', 'parseFleet', 'formatFleet'],
  'kvroute/replay': ['replay', 'loadTrace', 'REPLAY_DEFAULTS', 'findSrr', 'parseSlo', 'ReplayError'],
  'kvroute/trace': [
    'readTrace',
    'writeTrace',
    'formatTraceLine',
    'transformTrace',
    'synthesizeTrace',
    'MODEL_PRESETS',
    'characterizeTrace',
  ],
  'kvroute/tokenize': ['TokenizerPool', 'loadTokenizer', 'bundledTokenizerDir', 'TokenizerError'],
};

describe('package exports', () => {
  it('import { Router } from "kvroute" loads the routing core and none of the heavy packages', () => {
    const { exports, packages } = load('kvroute');
    expect(exports).toEqual(expect.arrayContaining(ENTRIES.kvroute!));
    expect(exports).not.toContain('createProxy');
    expect(packages.filter((p) => HEAVY.includes(p))).toEqual([]);
  });

  for (const [specifier, names] of Object.entries(ENTRIES)) {
    if (specifier === 'kvroute') continue;
    it(`${specifier} exports its part`, () => {
      expect(load(specifier).exports).toEqual(expect.arrayContaining(names));
    });
  }

  it('lists a types file and a module for every entry, both built', () => {
    const pkg = JSON.parse(readFileSync(`${root}/package.json`, 'utf8')) as {
      exports: Record<string, string | { types: string; default: string }>;
    };
    const subpaths = Object.keys(pkg.exports).filter((key) => key !== './package.json');
    expect(subpaths.map((key) => (key === '.' ? 'kvroute' : `kvroute/${key.slice(2)}`)).sort()).toEqual(
      Object.keys(ENTRIES).sort(),
    );
    for (const key of subpaths) {
      const entry = pkg.exports[key] as { types: string; default: string };
      expect(existsSync(`${root}/${entry.types}`), entry.types).toBe(true);
      expect(existsSync(`${root}/${entry.default}`), entry.default).toBe(true);
    }
  });
});
