/**
 * The load plane's parts without a network (docs/scale-out.md, "One load plane over NATS"): the
 * message round-trips and refuses malformed input naming the field; the peer table sums live
 * peers, applies deltas and full messages exactly, counts seq gaps and expires silent peers; a
 * replica's own load names only changed instances; the cluster options refuse bad values naming
 * the key.
 */
import { describe, expect, it } from 'vitest';
import { Packr } from 'msgpackr';

import { parseClusterOptions } from '../src/cluster/cluster-options.js';
import { decodeLoadMessage, encodeLoadMessage, type LoadMessage } from '../src/cluster/load-message.js';
import { OwnLoad } from '../src/cluster/own-load.js';
import { PeerLoadTable } from '../src/cluster/peer-load-table.js';
import { Router } from '../src/index.js';
import { serveFailure } from './helpers/proxy-serve-child.js';

const message = (over: Partial<LoadMessage>): LoadMessage => ({
  replica: 'r1',
  seq: 1,
  full: false,
  sentAtMs: 1000,
  load: [],
  placements: [],
  ...over,
});

describe('load messages', () => {
  it('round-trip', () => {
    const m = message({
      full: true,
      load: [['http://a:8000', [1, 2, 300, 40]]],
      placements: [
        ['s1', 'http://a:8000', 'qwen'],
        ['s2', 'http://b:8000', null],
      ],
    });
    expect(decodeLoadMessage(encodeLoadMessage(m))).toEqual(m);
  });

  it('refuse malformed input, naming the field', () => {
    const packr = new Packr({ useRecords: false });
    const bad = (o: unknown) => () => decodeLoadMessage(packr.pack(o));
    const good = { v: 1, r: 'r', s: 1, f: false, t: 1, i: [], p: [] };
    expect(() => decodeLoadMessage(new Uint8Array([0x92, 0x01]))).toThrow(/payload is not msgpack/);
    expect(bad([1, 2])).toThrow(/payload must be a map/);
    expect(() => decodeLoadMessage(new Uint8Array([0xc1]))).toThrow(/payload must be a map/);
    expect(bad({ ...good, v: 2 })).toThrow(/^load message: v must be 1/);
    expect(bad({ ...good, r: '' })).toThrow(/r must be a non-empty string/);
    expect(bad({ ...good, i: [['a', 1, 2, 3]] })).toThrow(/i\[0\] must be \[instance, 4 counts\]/);
    expect(bad({ ...good, i: [['a', 1, -2, 3, 4]] })).toThrow(/i\[0\]\[2\] must be an integer >= 0/);
    expect(bad({ ...good, p: [['s', 'a', 7]] })).toThrow(/p\[0\]\[2\] must be a non-empty string/);
    expect(bad({ ...good, f: 'yes' })).toThrow(/f must be a boolean/);
  });
});

describe('PeerLoadTable', () => {
  it('sums live peers, applies deltas and full messages exactly, and reports what changed', () => {
    const t = new PeerLoadTable();
    expect([...t.apply(message({ replica: 'r1', load: [['a', [1, 1, 100, 10]]] }), 0)]).toEqual(['a']);
    expect([
      ...t.apply(
        message({
          replica: 'r2',
          load: [
            ['a', [0, 2, 50, 5]],
            ['b', [3, 0, 0, 9]],
          ],
        }),
        0,
      ),
    ]).toEqual(['a', 'b']);
    expect(t.sum('a')).toEqual([1, 3, 150, 15]);
    // The same totals again change nothing.
    expect(t.apply(message({ replica: 'r1', seq: 2, load: [['a', [1, 1, 100, 10]]] }), 10).size).toBe(0);
    // A full message states every instance: b, left out, is zero now.
    const changed = t.apply(message({ replica: 'r2', seq: 2, full: true, load: [['a', [0, 2, 50, 5]]] }), 10);
    expect([...changed]).toEqual(['b']);
    expect(t.sum('b')).toEqual([0, 0, 0, 0]);
    // Zeros remove the entry.
    t.apply(message({ replica: 'r1', seq: 3, load: [['a', [0, 0, 0, 0]]] }), 20);
    expect(t.sum('a')).toEqual([0, 2, 50, 5]);
    expect(t.gaps).toBe(0);
    t.apply(message({ replica: 'r1', seq: 9 }), 20);
    expect(t.gaps).toBe(1);
  });

  it('forgets a peer not heard for the TTL, with its load', () => {
    const t = new PeerLoadTable();
    t.apply(message({ replica: 'r1', load: [['a', [1, 0, 0, 1]]] }), 0);
    t.apply(message({ replica: 'r2', load: [['a', [2, 0, 0, 2]]] }), 900);
    expect(t.expire(1000, 1000)).toEqual({ expired: [], changed: new Set() });
    const { expired, changed } = t.expire(1500, 1000);
    expect(expired).toEqual(['r1']);
    expect([...changed]).toEqual(['a']);
    expect(t.sum('a')).toEqual([2, 0, 0, 2]);
    expect(t.peerIds()).toEqual(['r2']);
  });
});

describe('OwnLoad', () => {
  it("states the router's own counters: changed instances in a delta, every one in a full message", () => {
    const router = new Router({ instances: ['a', 'b'], policy: 'round_robin' });
    const own = new OwnLoad(router);
    expect(own.next(false).load).toEqual([]);
    const ticket = router.route({ hashIds: [1, 2, 3], inputTokens: 48 });
    const first = router.decision.instance;
    own.placed('s', first, 'm');
    const delta = own.next(false);
    expect(delta.load).toEqual([[first, [0, 1, 48, 3]]]);
    expect(delta.placements).toEqual([['s', first, 'm']]);
    expect(own.next(false)).toEqual({ load: [], placements: [] });
    // Peers' load never leaks into what a replica says of itself.
    router.setPeerLoad(first, { waiting: 7 });
    expect(own.next(false).load).toEqual([]);
    router.complete(ticket);
    expect(own.next(false).load).toEqual([[first, [0, 0, 0, 0]]]);
    expect(own.next(true).load).toHaveLength(2);
  });
});

describe('cluster options', () => {
  it('take a URL or a map, with defaults', () => {
    const o = parseClusterOptions('nats://127.0.0.1:4222,nats://10.0.0.2:4222', '--cluster');
    expect(o).toMatchObject({ servers: ['nats://127.0.0.1:4222', 'nats://10.0.0.2:4222'], fleet: 'default' });
    expect(o.replica).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(
      parseClusterOptions({ nats: 'nats://h:1', fleet: 'prod', replica: 'r-1', ttl_ms: 900, full_every_ms: 300 }, 'c'),
    ).toMatchObject({ fleet: 'prod', replica: 'r-1', ttlMs: 900, fullEveryMs: 300, flushMs: 5 });
  });

  it('refuse bad values, naming the key', () => {
    const cases: Array<[unknown, RegExp]> = [
      ['http://h:1', /^--cluster must be nats:\/\/HOST:PORT URLs, got "http:\/\/h:1"/],
      [7, /^--cluster must be a nats:\/\/ URL or a map/],
      [{ nats: 'nats://h:1', fleet: 'a.b' }, /^--cluster\.fleet must be letters, digits, - and _ only/],
      [{ nats: 'nats://h:1', ttl_ms: 100 }, /^--cluster\.ttl_ms must be more than twice full_every_ms/],
      [{ nats: 'nats://h:1', flush_ms: 0 }, /^--cluster\.flush_ms must be an integer of milliseconds from 1/],
      [{ nats: 'nats://h:1', gossip: true }, /^--cluster: unknown key "gossip"/],
      [{ fleet: 'x' }, /^--cluster\.nats must be one or more nats:\/\/HOST:PORT URLs/],
    ];
    for (const [raw, error] of cases) expect(() => parseClusterOptions(raw, '--cluster')).toThrow(error);
  });
});

describe('kvroute serve --cluster', () => {
  it('refuses a bad value at start, naming the flag (exit 2)', async () => {
    const { code, stderr } = await serveFailure([
      '--backends',
      'http://127.0.0.1:9',
      '--cluster',
      'http://127.0.0.1:4222',
    ]);
    expect(code).toBe(2);
    expect(stderr).toMatch(/--cluster must be nats:\/\/HOST:PORT URLs, got "http:\/\/127\.0\.0\.1:4222"/);
  });
});
