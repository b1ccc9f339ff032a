/**
 * scripts/replica-grid.mjs: the tables in docs/scale-out.md are the ones its --tables-only renders
 * from docs/scale-out/replica-grid.json (so the prose tables and the data cannot drift apart), the
 * data holds every cell of the grid, and bad flags are refused naming the flag.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

const script = fileURLToPath(new URL('../scripts/replica-grid.mjs', import.meta.url));
const grid = fileURLToPath(new URL('../docs/scale-out/replica-grid.json', import.meta.url));
const doc = readFileSync(fileURLToPath(new URL('../docs/scale-out.md', import.meta.url)), 'utf8');
const run = (...args: string[]) =>
  spawnSync(process.execPath, [script, ...args], { encoding: 'utf8', timeout: 30_000 });

describe('scripts/replica-grid.mjs', () => {
  it('renders the tables docs/scale-out.md shows, from the committed grid', () => {
    const out = run('--tables-only', '--out', grid);
    expect(out.status, out.stderr).toBe(0);
    const tables = out.stdout.split('\n\n').filter((block) => block.startsWith('| '));
    expect(tables).toHaveLength(8);
    for (const table of tables) expect(doc).toContain(table.trim());
  });

  it('holds all 168 cells, own, events and all, each with its figures', () => {
    const { cells } = JSON.parse(readFileSync(grid, 'utf8')) as { cells: Array<Record<string, unknown>> };
    expect(cells).toHaveLength(168);
    for (const sync of ['own', 'events', 'all']) expect(cells.filter((c) => c.sync === sync)).toHaveLength(56);
    for (const c of cells) {
      expect(c.apc).toBeGreaterThan(0);
      expect(c.ttft_p90_s).toBeGreaterThan(0);
      expect(c.instances_per_session).toBeGreaterThanOrEqual(1);
    }
  });

  it('refuses bad flags naming them', () => {
    const jobs = run('--jobs', '0');
    expect(jobs.status).toBe(2);
    expect(jobs.stderr).toMatch('--jobs must be an integer from 1 to 64, got 0');
    const syncs = run('--syncs', 'own,gossip');
    expect(syncs.status).toBe(2);
    expect(syncs.stderr).toMatch('--syncs must list own, events, all, got gossip');
    const missing = run('--tables-only', '--out', '/nonexistent/grid.json');
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch('no such file');
  });
});
