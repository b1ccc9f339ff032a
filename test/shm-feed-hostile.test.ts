/**
 * The shared-memory feed is input from other processes, trusted no further than it must be
 * (docs/shm-layout.md, "A hostile or damaged feed"): a timestamp from the future or at either end
 * of int64 is not fresh (and overflows nothing), a publisher cannot ask for a timestamp an int64
 * cannot hold, and a file truncated in place under a live reader leaves the process running, the
 * reader on shadow state and a status that says why.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, closeSync, readSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { Router } from '../src/core/router.js';
import { StateFeedWriter } from '../src/state/shm-feed.js';

const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'kvroute-feed-hostile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const fresh = () => join(dir, `feed-${files++}`);

const LOADED = {
  running: 10,
  waiting: 0,
  kvBlocksUsed: 0,
  kvBlocksTotal: 1000,
  pendingPrefillTokens: 0,
  maxPrefillRemaining: 0,
  decodeBatch: 0,
  prefixCacheQueries: 0,
  prefixCacheHits: 0,
};
const HEADER_BYTES = 64;
const SLOT_BYTES = 128;

/** Writes `timestampNs` into a published slot in place, moving its sequence on as a writer would. */
function stampRaw(path: string, slot: number, timestampNs: bigint) {
  const fd = openSync(path, 'r+');
  try {
    const at = HEADER_BYTES + slot * SLOT_BYTES;
    const seq = Buffer.alloc(8);
    readSync(fd, seq, 0, 8, at);
    const raw = Buffer.alloc(16);
    raw.writeBigUInt64LE(seq.readBigUInt64LE(0) + 2n, 0); // even: settled, and new to the reader's cache
    raw.writeBigInt64LE(timestampNs, 8);
    writeSync(fd, raw, 0, 16, at);
  } finally {
    closeSync(fd);
  }
}

describe('a hostile feed', () => {
  for (const native of [true, false]) {
    const impl = native ? 'native' : 'reference';

    it(`${impl}: a timestamp from the future or at int64's ends is not fresh`, () => {
      const path = fresh();
      const writer = new StateFeedWriter(path, { slots: 2 });
      const router = new Router({ instances: 2, policy: 'load_only', native, engineState: { shm: path } });
      const route = () => {
        const ticket = router.route({ hashIds: [1, 2, 3] });
        const chosen = router.decision.index;
        router.complete(ticket);
        return chosen;
      };
      expect(route()).toBe(0); // nothing published: shadow only, ties to the lowest index
      writer.publish(0, 'a', LOADED);
      expect(route()).toBe(1); // fresh: instance 0 is loaded
      writer.publish(0, 'a', LOADED, { timestampMs: Date.now() + 60_000 });
      expect(route()).toBe(0); // a minute ahead: not fresh (it was fresh forever)
      writer.publish(0, 'a', LOADED, { timestampMs: Date.now() + 20 });
      expect(route()).toBe(1); // within the skew (100 ms)
      for (const hostile of [-(2n ** 63n), 2n ** 63n - 1n, -1n]) {
        stampRaw(path, 0, hostile);
        expect(route()).toBe(0);
      }
      writer.publish(0, 'a', LOADED);
      expect(route()).toBe(1);
      writer.close();
    });
  }

  it('a publisher cannot stamp a time an int64 of nanoseconds cannot hold', () => {
    const writer = new StateFeedWriter(fresh(), { slots: 1 });
    expect(() => writer.publish(0, 'a', LOADED, { timestampMs: 1e300 })).toThrow(/timestampMs/);
    expect(() => writer.publish(0, 'a', LOADED, { timestampMs: 9_300_000_000_000 })).toThrow(/timestampMs/);
    writer.close();
  });
});

describe('a feed file truncated in place under a live reader', () => {
  // In a child: before bus-guard.cc the first read past the new end killed the process (SIGBUS).
  const router = new URL('../dist/core/router.js', import.meta.url).href;
  const feed = new URL('../dist/state/shm-feed.js', import.meta.url).href;
  const script = (path: string) => `
    import { truncateSync } from 'node:fs';
    import { Router } from ${JSON.stringify(router)};
    import { StateFeedReader, StateFeedWriter } from ${JSON.stringify(feed)};
    const path = ${JSON.stringify(path)};
    const LOADED = ${JSON.stringify(LOADED)};
    const writer = new StateFeedWriter(path, { slots: 2 });
    writer.publish(0, 'a', LOADED);
    const warnings = [];
    // recheckMs far beyond the test: only the fault can make the reader look again.
    const reader = new StateFeedReader(path, { recheckMs: 3_600_000, warn: (m) => warnings.push(m) });
    const routers = [true, false].map((native) =>
      new Router({ instances: 2, policy: 'load_only', native, engineState: { shm: path }, onWarning: (m) => warnings.push(m) }));
    const route = (r) => { const t = r.route({ hashIds: [1, 2, 3] }); const i = r.decision.index; r.complete(t); return i; };
    const out = { before: routers.map(route), readBefore: reader.read(0)?.instance ?? null };
    truncateSync(path, 0); // in place: every mapping of it now ends at its first page
    out.readAfter = reader.read(0) ?? null;
    out.statusAfterRead = reader.refresh();
    out.after = routers.map(route);
    writer.publish(1, 'b', LOADED); // the writer's own mapping is past the end too
    out.published = true;
    out.warnings = warnings.length;
    console.log(JSON.stringify(out));`;

  it('survives: reads come back empty, the status says bad-size, routing falls back on shadow', () => {
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script(fresh())], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(child.stderr).toBe('');
    expect(child.signal).toBeNull();
    expect(child.status).toBe(0);
    const out = JSON.parse(child.stdout);
    expect(out).toMatchObject({
      before: [1, 1], // the loaded instance 0 avoided, both cores
      readBefore: 'a',
      readAfter: null,
      statusAfterRead: 'bad-size',
      after: [0, 0], // shadow state: ties to the lowest index
      published: true,
    });
    expect(out.warnings).toBeGreaterThan(0);
  });
});
