/**
 * The shared-memory engine-state feed (docs/shm-layout.md): the addon's writer and reader, the
 * Python writer, torn reads across processes, and every malformed-file case.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

import { Router } from '../src/core/router.js';
import { StateFeedReader, StateFeedWriter, feedPath } from '../src/state/shm-feed.js';
import { Rng } from './helpers/random.js';
import { startSimServe } from './helpers/sim-serve-child.js';
import { waitFor } from './helpers/wait-for.js';

const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'kvroute-feed-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const fresh = () => join(dir, `feed-${files++}`);

const COUNTS = {
  running: 5,
  waiting: 2,
  kvBlocksUsed: 9_000,
  kvBlocksTotal: 20_194,
  pendingPrefillTokens: 12_000,
  maxPrefillRemaining: 8_000,
  decodeBatch: 4,
  prefixCacheQueries: 123_456,
  prefixCacheHits: 100_000,
};

function silentReader(path: string, recheckMs = 100) {
  const warnings: string[] = [];
  const reader = new StateFeedReader(path, { recheckMs, warn: (m) => warnings.push(m) });
  return { reader, warnings };
}

describe('the addon writer and reader', () => {
  it('round-trips every field and the instance id; an unpublished slot reads as nothing', () => {
    const path = fresh();
    const writer = new StateFeedWriter(path, { slots: 4 });
    const before = Date.now();
    writer.publish(2, 'engine-2', COUNTS);
    const { reader, warnings } = silentReader(path);
    expect(reader.status).toBe('ok');
    expect(reader.slots).toBe(4);
    expect(reader.generation).toBe(writer.generation);
    expect(reader.generation).not.toBe(0n);
    const snapshot = reader.read(2)!;
    expect(snapshot).toMatchObject({ instance: 'engine-2', unreachable: false, ...COUNTS });
    expect(snapshot.timestampMs).toBeGreaterThanOrEqual(before - 1);
    expect(snapshot.timestampMs).toBeLessThanOrEqual(Date.now() + 1);
    expect(reader.read(0)).toBeUndefined();
    expect(reader.read(9)).toBeUndefined();
    expect(warnings).toEqual([]);
    writer.close();
    reader.close();
  });

  it('joins a feed of the same shape, and re-creating it gives a new generation the reader follows', () => {
    const path = fresh();
    const first = new StateFeedWriter(path, { slots: 2 });
    first.publish(0, 'a', COUNTS, { unreachable: true });
    const joined = new StateFeedWriter(path, { slots: 2 });
    expect(joined.generation).toBe(first.generation);
    const { reader } = silentReader(path);
    expect(reader.read(0)).toMatchObject({ instance: 'a', unreachable: true });
    const recreated = new StateFeedWriter(path, { slots: 3, recreate: true });
    expect(recreated.generation).not.toBe(first.generation);
    expect(reader.refresh(true)).toBe('ok');
    expect(reader.slots).toBe(3);
    expect(reader.generation).toBe(recreated.generation);
    expect(reader.read(0)).toBeUndefined(); // the new file starts empty
    for (const w of [first, joined, recreated]) w.close();
    reader.close();
  });

  it('keeps at most 47 bytes of the instance id', () => {
    const path = fresh();
    const writer = new StateFeedWriter(path, { slots: 1 });
    writer.publish(0, 'x'.repeat(80), COUNTS);
    const { reader } = silentReader(path);
    expect(reader.read(0)!.instance).toBe('x'.repeat(47));
    writer.close();
    reader.close();
  });

  it('refuses bad values, naming the field, and writes nothing', () => {
    const path = fresh();
    const writer = new StateFeedWriter(path, { slots: 1 });
    expect(() => writer.publish(0, 'e', { ...COUNTS, running: -1 })).toThrow(/running/);
    expect(() => writer.publish(0, 'e', { ...COUNTS, kvBlocksUsed: 1.5 })).toThrow(/kvBlocksUsed/);
    expect(() => writer.publish(0, 'e', { ...COUNTS, decodeBatch: 2 ** 32 })).toThrow(/decodeBatch/);
    expect(() => writer.publish(1, 'e', COUNTS)).toThrow(/slot/);
    expect(() => new StateFeedWriter(fresh(), { slots: 0 })).toThrow(/slots/);
    const { reader } = silentReader(path);
    expect(reader.read(0)).toBeUndefined();
    writer.close();
    expect(() => writer.publish(0, 'e', COUNTS)).toThrow(/closed/);
    reader.close();
  });

  it('names /dev/shm for a bare feed name and keeps a path as it is', () => {
    expect(feedPath('x/y')).toBe('x/y');
    expect(feedPath('kv')).toMatch(/\/kv$/);
    expect(() => feedPath('')).toThrow(/shm/);
  });
});

describe('malformed and missing feeds', () => {
  const bytes = (
    header: Partial<{ magic: string; version: number; slots: number; slotSize: number }>,
    size?: number,
  ) => {
    const slots = header.slots ?? 2;
    const buffer = Buffer.alloc(size ?? 64 + slots * 128);
    buffer.write(header.magic ?? 'KVRSTATE', 0, 'latin1');
    buffer.writeUInt32LE(header.version ?? 1, 8);
    buffer.writeUInt32LE(slots, 12);
    buffer.writeUInt32LE(header.slotSize ?? 128, 16);
    buffer.writeBigUInt64LE(7n, 24);
    return buffer;
  };

  for (const [name, content, status] of [
    ['a wrong magic', bytes({ magic: 'NOTSTATE' }), 'bad-magic'],
    ['a wrong version', bytes({ version: 2 }), 'bad-version'],
    ['a wrong slot size', bytes({ slotSize: 64 }), 'bad-size'],
    ['a file shorter than its header says', bytes({ slots: 4 }, 64 + 2 * 128), 'bad-size'],
    ['a file shorter than a header', Buffer.from('KVRS'), 'bad-size'],
  ] as const) {
    it(`falls back on ${name}: reads give nothing, one warning`, () => {
      const path = fresh();
      writeFileSync(path, content);
      const { reader, warnings } = silentReader(path, 0);
      expect(reader.status).toBe(status);
      expect(reader.read(0)).toBeUndefined();
      for (let i = 0; i < 5; i++) reader.refresh(true);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(path);
      expect(warnings[0]).toContain('using shadow state');
      reader.close();
    });
  }

  it('warns once about a missing file, and picks the feed up when it appears', () => {
    const path = fresh();
    const { reader, warnings } = silentReader(path, 0);
    expect(reader.status).toBe('missing');
    expect(reader.read(0)).toBeUndefined();
    reader.refresh(true);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/does not exist/);
    const writer = new StateFeedWriter(path, { slots: 1 });
    writer.publish(0, 'late', COUNTS);
    expect(reader.refresh(true)).toBe('ok');
    expect(reader.read(0)?.instance).toBe('late');
    writer.close();
    reader.close();
  });

  it('drops a file truncated while mapped at the next check, without a fault', () => {
    const path = fresh();
    const writer = new StateFeedWriter(path, { slots: 2 });
    writer.publish(1, 'e', COUNTS);
    const { reader, warnings } = silentReader(path, 0);
    expect(reader.read(1)?.instance).toBe('e');
    truncateSync(path, 64);
    expect(reader.refresh(true)).toBe('bad-size');
    expect(reader.read(1)).toBeUndefined();
    expect(warnings).toHaveLength(1);
    // Rewritten whole (magic, version, slot count) to a good state: read again.
    const fd = openSync(path, 'r+');
    writeSync(fd, Buffer.alloc(2 * 128), 0, 2 * 128, 64);
    closeSync(fd);
    expect(reader.refresh(true)).toBe('ok');
    writer.close();
    reader.close();
  });
});

describe('across processes', () => {
  it('accepts zero torn snapshots in 1M+ reads while another process writes flat out', async () => {
    const path = fresh();
    new StateFeedWriter(path, { slots: 2 }).close();
    const script = fileURLToPath(new URL('./fixtures/feed-writer.mjs', import.meta.url));
    const child = spawn(process.execPath, [script, path], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.once('data', () => resolve());
        child.once('exit', (code) => reject(new Error(`writer exited early (${code})`)));
      });
      const { reader } = silentReader(path);
      let reads = 0;
      let torn = 0;
      let last = 0;
      let changes = 0;
      // At least 1M reads, and on until the writer has really written 1,000 times meanwhile (a
      // loaded 2-core machine may not schedule it much during the first million); bounded in
      // reads and time.
      const deadline = Date.now() + 60_000;
      while ((reads < 1_000_000 || changes <= 1_000) && reads < 50_000_000 && Date.now() < deadline) {
        const s = reader.read(0);
        if (s === undefined) continue; // busy for every attempt: not a value, not torn
        reads++;
        const c = s.kvBlocksUsed / 3;
        const consistent =
          Number.isInteger(c) &&
          s.running === c % 2 ** 32 &&
          s.waiting === (c * 7) % 2 ** 32 &&
          s.kvBlocksTotal === c * 3 + 11 &&
          s.pendingPrefillTokens === c * 5 &&
          s.maxPrefillRemaining === c * 4 &&
          s.decodeBatch === (c * 13) % 2 ** 32 &&
          s.prefixCacheQueries === c * 17 &&
          s.prefixCacheHits === c * 19 &&
          Math.abs(s.timestampMs - (1e12 + c)) < 1e-3 && // ms → int64 ns → ms rounds at 1e12 ms
          s.instance === `w${c}` &&
          c >= last;
        if (!consistent) torn++;
        if (c !== last) changes++;
        last = c;
      }
      reader.close();
      expect(reads).toBeGreaterThanOrEqual(1_000_000);
      expect(torn).toBe(0);
      expect(changes).toBeGreaterThan(1_000); // the writer really was writing meanwhile
    } finally {
      child.stdin.end();
      await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined)));
    }
  }, 120_000);

  const python = fileURLToPath(new URL('../python/kvroute_state.py', import.meta.url));
  const hasPython = spawnSync('python3', ['--version']).status === 0;

  it.runIf(hasPython)('reads what the Python writer published, field for field', () => {
    const path = fresh();
    const run = spawnSync(
      'python3',
      [
        python,
        ...['--shm', path, '--slots', '4', '--instance', '3', '--id', 'vllm-3'],
        ...['--running', '5', '--waiting', '2', '--kv-used', '9000', '--kv-total', '20194'],
        ...['--pending-prefill', '12000', '--max-prefill-remaining', '8000', '--decode-batch', '4'],
        ...['--prefix-queries', '123456', '--prefix-hits', '100000'],
      ],
      { encoding: 'utf8' },
    );
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const { reader, warnings } = silentReader(path);
    expect(reader.slots).toBe(4);
    const snapshot = reader.read(3)!;
    expect(snapshot).toMatchObject({ instance: 'vllm-3', unreachable: false, ...COUNTS });
    expect(Math.abs(snapshot.timestampMs - Date.now())).toBeLessThan(60_000);
    expect(warnings).toEqual([]);
    // The Python writer joins a feed the addon created, keeping its generation.
    const writer = new StateFeedWriter(path, { slots: 4 });
    expect(writer.generation).toBe(reader.generation);
    writer.close();
    reader.close();
  });

  it.runIf(hasPython)('the Python script refuses bad input with a message, writing nothing', () => {
    const path = fresh();
    const args = ['--shm', path, '--slots', '2', '--instance', '0', '--waiting', '0', '--kv-used', '0'];
    const rest = ['--kv-total', '1', '--pending-prefill', '0', '--max-prefill-remaining', '0', '--decode-batch', '0'];
    const negative = spawnSync('python3', [python, ...args, '--running', '-1', ...rest], { encoding: 'utf8' });
    expect(negative.status).toBe(1);
    expect(negative.stderr).toMatch(/running must be an integer/);
    const { reader } = silentReader(path);
    expect(reader.read(0)).toBeUndefined();
    reader.close();
    const slot = spawnSync('python3', [python, ...args.slice(0, 5), '5', ...args.slice(6), '--running', '1', ...rest], {
      encoding: 'utf8',
    });
    expect(slot.status).toBe(1);
    expect(slot.stderr).toMatch(/slot must be an integer in \[0, 1\]/);
  });
});

describe('kvroute state watch and sim serve --shm', () => {
  const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
  const kvroute = (args: string[]) =>
    spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 30_000 });

  it('prints one reading as JSON with the issue’s keys, and exits 1 on a missing feed', () => {
    const path = fresh();
    const writer = new StateFeedWriter(path, { slots: 3 });
    writer.publish(1, 'engine-1', COUNTS);
    const run = kvroute(['state', 'watch', path, '--once', '--json']);
    expect(run.status).toBe(0);
    const doc = JSON.parse(run.stdout);
    expect(doc.generation).toBe(writer.generation.toString());
    expect(doc.instances).toHaveLength(1);
    expect(doc.instances[0]).toMatchObject({
      slot: 1,
      instance: 'engine-1',
      running: 5,
      waiting: 2,
      kv_blocks_used: 9_000,
      kv_blocks_total: 20_194,
      pending_prefill_tokens: 12_000,
      max_prefill_remaining: 8_000,
      decode_batch: 4,
    });
    expect(doc.instances[0].age_ms).toBeGreaterThanOrEqual(0);
    const once = kvroute(['state', 'watch', path, '--once']).stdout;
    expect(once).toMatch(/engine-1/);
    // Every column names its unit in the row under the header; counts scale (12,000 → 12.0 k).
    expect(once).toMatch(/\n\s+(µs|ms|s|min|h)\s+requests\s+requests\s+blocks\s+%\s+tokens\s+tokens\s+sequences\n/);
    expect(once).toMatch(/engine-1 .* 9\.0 k\/20\.2 k\s+44\.6\s+12\.0 k\s+8\.0 k\s+4$/m);
    writer.close();
    const missing = kvroute(['state', 'watch', join(dir, 'nothing-here'), '--once']);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/nothing-here does not exist/);
    expect(kvroute(['state', 'peek']).status).toBe(2);
  });

  it('sim serve --shm publishes every engine’s state, slot i for engine i', async () => {
    const path = fresh();
    const serve = await startSimServe(2, ['--shm', path, '--publish-ms', '20']);
    const { urls } = serve;
    try {
      const body = JSON.stringify({ model: 'qwen3-coder-30b-a3b', prompt: 'x'.repeat(400), max_tokens: 400 });
      const pending = fetch(`${urls[1]}/v1/completions`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json' },
      });
      const { reader } = silentReader(path, 0);
      let seen: ReturnType<StateFeedReader['read']>;
      await waitFor(
        'engine 1 to publish its running request',
        () => {
          reader.refresh(true);
          seen = reader.read(1);
          return seen?.running === 1;
        },
        { intervalMs: 20, detail: () => seen },
      );
      expect(seen).toMatchObject({ instance: new URL(urls[1]!).host, running: 1 });
      expect(reader.read(0)).toMatchObject({ instance: new URL(urls[0]!).host, running: 0 });
      expect(Date.now() - seen!.timestampMs).toBeLessThan(2_000);
      reader.close();
      expect((await pending).status).toBe(200);
    } finally {
      expect(await serve.stop()).toBe(0);
    }
  }, 60_000);
});

describe('kvroute state freshness', () => {
  const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
  const freshness = (args: string[]) =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [cli, 'state', 'freshness', ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d));
      child.stderr.on('data', (d: Buffer) => (stderr += d));
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });

  it('reports ages under a live 50 ms publisher as fresh, and a dead one as all stale', async () => {
    const path = fresh();
    const serve = await startSimServe(2, ['--shm', path, '--publish-ms', '50']);
    let stopped = false;
    try {
      const live = await freshness([path, '--duration', '1500', '--json']);
      expect(live.status).toBe(0);
      const doc = JSON.parse(live.stdout);
      expect(doc.instances.map((i: { slot: number }) => i.slot)).toEqual([0, 1]);
      expect(doc.samples).toBeGreaterThan(20);
      // Publishing every 50 ms gives ages of 0-50 ms (median ~25); the bound leaves room for a
      // loaded machine while still failing a publisher that stopped or a clock mix-up.
      expect(doc.median_ms).toBeGreaterThanOrEqual(0);
      expect(doc.median_ms).toBeLessThan(500);
      expect(doc.pct_stale).toBe(0);
      expect(await serve.stop()).toBe(0);
      stopped = true;
      // The writer is gone: every age now exceeds a 1 ms staleness.
      const dead = await freshness([path, '--duration', '300', '--staleness', '1', '--json']);
      expect(dead.status).toBe(0);
      expect(JSON.parse(dead.stdout).pct_stale).toBe(100);
      const table = await freshness([path, '--duration', '100']);
      expect(table.stdout).toMatch(/median age [\d.]+ (ms|s|min), p99 [\d.]+ (ms|s|min), .*% older than 2\.0 s/);
      expect(table.stdout).toMatch(/readings\s+median \((ms|s|min)\)\s+p99 \((ms|s|min)\)\s+stale \(%\)/);
    } finally {
      if (!stopped) await serve.stop();
    }
    const missing = await freshness([join(dir, 'no-such-feed'), '--duration', '100']);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/no-such-feed does not exist/);
    expect((await freshness([path, '--duration', 'soon'])).stderr).toMatch(/--duration must be a positive integer/);
  });
});

describe('the router reads the feed', () => {
  const ids = (n: number, base: number) => Array.from({ length: n }, (_, i) => base + i);

  for (const native of [true, false]) {
    const impl = native ? 'native' : 'reference';

    it(`${impl}: a fresh snapshot moves the decision, a stale or unreachable one does not`, () => {
      const path = fresh();
      const writer = new StateFeedWriter(path, { slots: 2 });
      const warnings: string[] = [];
      const router = new Router({
        instances: 2,
        policy: 'load_only',
        native,
        engineState: { shm: path },
        onWarning: (m) => warnings.push(m),
      });
      const route = () => {
        const ticket = router.route({ hashIds: ids(4, 1) });
        const chosen = router.decision.index;
        router.complete(ticket);
        return chosen;
      };
      expect(route()).toBe(0); // nothing published: shadow only, ties to the lowest index
      writer.publish(0, 'a', { ...COUNTS, running: 10, waiting: 0 });
      expect(route()).toBe(1);
      writer.publish(0, 'a', { ...COUNTS, running: 10, waiting: 0 }, { timestampMs: Date.now() - 5_000 });
      expect(route()).toBe(0); // older than stalenessMs (2 s)
      writer.publish(0, 'a', { ...COUNTS, running: 10, waiting: 0 }, { unreachable: true });
      expect(route()).toBe(0);
      expect(warnings).toEqual([]);
      writer.close();
    });

    it(`${impl}: a missing or malformed feed routes on shadow and warns once`, async () => {
      const path = fresh();
      const warnings: string[] = [];
      const options = { instances: 3, policy: 'lmetric' as const, native };
      const router = new Router({ ...options, engineState: { shm: path }, onWarning: (m) => warnings.push(m) });
      const shadow = new Router(options);
      for (let i = 0; i < 600; i++) {
        const request = { hashIds: ids(1 + (i % 7), i * 10), session: `s${i % 5}` };
        router.route(request);
        shadow.route(request);
        expect(router.decision.index).toBe(shadow.decision.index);
      }
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/does not exist.*using shadow state/);
      // The feed appears: this router's reader picks it up at its next re-check (every 100 ms).
      // It says one engine is idle and the others are swamped; on shadow state alone the
      // routers send a new prompt elsewhere, so only a router that reads the feed picks it.
      const pick = (r: Router) => {
        const ticket = r.route({ hashIds: ids(3, 7) });
        r.complete(ticket);
        return r.decision.index;
      };
      const idle = (pick(shadow) + 1) % 3;
      expect(pick(router)).not.toBe(idle);
      const writer = new StateFeedWriter(path, { slots: 3 });
      const nothing = { running: 0, waiting: 0, kvBlocksUsed: 0, pendingPrefillTokens: 0, maxPrefillRemaining: 0 };
      for (const slot of [0, 1, 2])
        writer.publish(slot, `e${slot}`, slot === idle ? { ...COUNTS, ...nothing } : { ...COUNTS, running: 5_000 });
      await waitFor(
        `the existing router to read the feed that appeared and pick idle engine ${idle}`,
        () => pick(router) === idle,
      );
      expect(warnings).toHaveLength(1); // the reader recovered silently
      writer.close();
      writeFileSync(join(dir, 'garbage'), Buffer.alloc(64 + 128));
      const garbage: string[] = [];
      const broken = new Router({
        ...options,
        engineState: { shm: join(dir, 'garbage') },
        onWarning: (m) => garbage.push(m),
      });
      broken.route({ hashIds: ids(2, 3) });
      expect(garbage).toEqual([expect.stringMatching(/wrong magic/)]);
    });
  }

  it('native and reference make the same decisions on the same feed (randomized)', () => {
    const path = fresh();
    const writer = new StateFeedWriter(path, { slots: 4 });
    const random = new Rng(17);
    for (const policy of ['lmetric', 'unified+A+B', 'load_only', 'unified_kv_both'] as const) {
      const make = (native: boolean) => new Router({ instances: 4, policy, native, engineState: { shm: path } });
      const [a, b] = [make(true), make(false)];
      for (let i = 0; i < 300; i++) {
        if (random.chance(0.3)) {
          const slot = random.int(0, 3);
          writer.publish(slot, `e${slot}`, {
            running: random.int(0, 20),
            waiting: random.int(0, 20),
            kvBlocksUsed: random.int(0, 1000),
            kvBlocksTotal: 1000,
            pendingPrefillTokens: random.int(0, 50_000),
            maxPrefillRemaining: random.int(0, 8192),
            decodeBatch: random.int(0, 20),
          });
        }
        // Ids as real prompts have them: a conversation's blocks, so prefixes are shared, never shifted.
        const conversation = random.int(0, 9);
        const request = { hashIds: ids(random.int(1, 20), conversation * 1000), session: `s${conversation}` };
        const [ta, tb] = [a.route(request), b.route(request)];
        expect([b.decision.index, b.decision.reason]).toEqual([a.decision.index, a.decision.reason]);
        if (random.chance(0.5)) {
          a.complete(ta);
          b.complete(tb);
        }
      }
    }
    writer.close();
  });
});

describe('feed options refused with the field named', () => {
  it.each([
    [{ engineState: 42 }, /options.engineState must be an object/],
    [{ engineState: { shm: 5 } }, /options.engineState.shm must be a feed name or path/],
    [{ engineState: { shm: '' } }, /shm must be a feed name or a path/],
    [{ onWarning: 'loud' }, /options.onWarning must be a function/],
  ])('%j', (extra, message) => {
    expect(() => new Router({ instances: 1, ...(extra as object) })).toThrow(message);
  });
});
