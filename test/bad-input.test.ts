/**
 * Every bad input gets a TypeError (wrong type) or RangeError (bad value)
 * with a stable ERR_KVROUTE_* code and a message naming the field; nothing
 * crashes and nothing is left half-updated.
 */
import { describe, expect, it } from 'vitest';

import type { CoreRouterConstructor } from '../src/core/core-router.js';
import { loadNative } from '../src/core/native.js';
import { resolvePolicy, toCorePolicy } from '../src/core/policy-spec.js';
import { ReferenceRouter } from '../src/core/reference/reference-router.js';
import { Router, type RouterOptions } from '../src/index.js';
import { IMPLEMENTATIONS, comparableStats, thrown } from './helpers/routers.js';

const TYPE = { name: 'TypeError', code: 'ERR_KVROUTE_INVALID_ARG_TYPE' };
const VALUE = { name: 'RangeError', code: 'ERR_KVROUTE_INVALID_ARG_VALUE' };

describe.each(IMPLEMENTATIONS)('bad input ($impl)', ({ native }) => {
  const make = (options: Partial<RouterOptions> = {}) =>
    new Router({ instances: 2, native, clock: 'manual', ...options } as RouterOptions);

  it.each([
    ['a string', 'abc'],
    ['an object', { 0: 1 }],
    ['a number', 5],
    ['an Int32Array', new Int32Array(3)],
    ['a BigInt64Array', new BigInt64Array(3)],
  ])('hashIds as %s is a TypeError naming the field', (_, hashIds) => {
    const error = thrown(() => make().route({ hashIds: hashIds as never }));
    expect(error).toMatchObject(TYPE);
    expect(error.message).toContain('request.hashIds');
  });

  it.each([
    ['a non-integer', [1, 2.5], 'request.hashIds[1]'],
    ['a negative id', [0, -1], 'request.hashIds[1]'],
    ['an id of 2^53', [2 ** 53], 'request.hashIds[0]'],
    ['NaN', [3, 4, NaN], 'request.hashIds[2]'],
    ['Infinity', [Infinity], 'request.hashIds[0]'],
    ['a bigint of 2^64', [1n, 2n ** 64n], 'request.hashIds[1]'],
    ['a negative bigint', [-1n], 'request.hashIds[0]'],
  ])('%s in an array is a RangeError naming the element', (_, hashIds, field) => {
    const error = thrown(() => make().route({ hashIds: hashIds as number[] }));
    expect(error).toMatchObject(VALUE);
    expect(error.message).toContain(field);
  });

  it.each([
    ['a string', [1, '2'], 'request.hashIds[1]'],
    ['a number among bigints', [1n, 2], 'request.hashIds[1]'],
  ])('%s element is a TypeError naming the element', (_, hashIds, field) => {
    const error = thrown(() => make().route({ hashIds: hashIds as number[] }));
    expect(error).toMatchObject(TYPE);
    expect(error.message).toContain(field);
  });

  it.each([
    ['a non-integer', Float64Array.of(1, 2, 2.5), 'hashIds[2]', 'got 2.5'],
    ['NaN', Float64Array.of(NaN), 'hashIds[0]', 'got NaN'],
    ['a negative id', Float64Array.of(1, -3), 'hashIds[1]', 'got -3'],
    ['an id of 2^53', Float64Array.of(2 ** 53), 'hashIds[0]', 'got 9007199254740992'],
  ])('%s in a Float64Array is a RangeError from the core, naming the element', (_, hashIds, field, got) => {
    const error = thrown(() => make().route({ hashIds }));
    expect(error).toMatchObject(VALUE);
    expect(error.message).toContain(field);
    expect(error.message).toContain(got);
  });

  it('more than 16,777,215 ids is a RangeError', () => {
    const error = thrown(() => make().route({ hashIds: new Uint32Array(16_777_216) }));
    expect(error).toMatchObject(VALUE);
    expect(error.message).toContain('hashIds');
  });

  it('a bad request is refused before anything changes', () => {
    for (const policy of ['sticky', 'unified', 'round_robin'] as const) {
      const r = make({ policy, capacityBlocks: 100 });
      r.route({ hashIds: [1, 2, 3], session: 's0' });
      const before = { stats: comparableStats(r), match: r.match({ hashIds: [1, 2, 3, 4] }) };
      for (const hashIds of [Float64Array.of(1, 2, 3, 4, 0.5), [1, 2, 3, 4, NaN]]) {
        expect(() => r.route({ hashIds, session: 's1' })).toThrow(RangeError);
        expect(() => r.explain({ hashIds, session: 's1' })).toThrow(RangeError);
      }
      expect(() => r.route({ hashIds: [9, 8], session: {} as unknown as string })).toThrow(TypeError);
      expect(() => r.route({ hashIds: [9, 8], inputTokens: -1 })).toThrow(RangeError);
      expect({ stats: comparableStats(r), match: r.match({ hashIds: [1, 2, 3, 4] }) }).toEqual(before);
      expect(r.checkInvariants()).toBe('');
    }
  });

  it.each([
    ['request', null, TYPE, 'request'],
    ['session', { session: { id: 1 } }, TYPE, 'request.session'],
    ['session NaN', { session: NaN }, TYPE, 'request.session'],
    ['inputTokens type', { inputTokens: '5' }, TYPE, 'request.inputTokens'],
    ['inputTokens negative', { inputTokens: -1 }, VALUE, 'request.inputTokens'],
    ['inputTokens fraction', { inputTokens: 1.5 }, VALUE, 'request.inputTokens'],
    ['prompt', { prompt: 42 }, TYPE, 'request.prompt'],
    ['messages', { messages: 'hi' }, TYPE, 'request.messages'],
    ['message', { messages: [null] }, TYPE, 'request.messages[0]'],
    ['role', { messages: [{ content: 'x' }] }, TYPE, 'request.messages[0].role'],
    ['content', { messages: [{ role: 'user', content: 7 }] }, TYPE, 'request.messages[0].content'],
    ['two id sources', { prompt: 'a', hashIds: [1] }, VALUE, 'request.hashIds'],
    ['model a number', { model: 5 }, TYPE, 'request.model'],
    ['model null', { model: null }, TYPE, 'request.model'],
    ['model empty', { model: '' }, VALUE, 'request.model'],
    ['blockTokens a string', { hashIds: [1], blockTokens: '32' }, TYPE, 'request.blockTokens'],
    ['blockTokens zero', { hashIds: [1], blockTokens: 0 }, VALUE, 'request.blockTokens'],
    ['blockTokens negative', { blockTokens: -16 }, VALUE, 'request.blockTokens'],
    ['blockTokens fraction', { hashIds: [1], blockTokens: 1.5 }, VALUE, 'request.blockTokens'],
    ['blockTokens NaN', { hashIds: [1], blockTokens: NaN }, VALUE, 'request.blockTokens'],
    ['blockTokens over 2^24', { hashIds: [1], blockTokens: 2 ** 24 + 1 }, VALUE, 'request.blockTokens'],
    ['blockTokens with a prompt', { prompt: 'a', blockTokens: 32 }, VALUE, 'request.blockTokens'],
    ['blockTokens with messages', { messages: [], blockTokens: 32 }, VALUE, 'request.blockTokens'],
  ])('%s: %j', (_, request, expected, field) => {
    const error = thrown(() => make().route(request as never));
    expect(error).toMatchObject(expected);
    expect(error.message).toContain(field);
    // A dry run checks exactly the same.
    expect(thrown(() => make().explain(request as never)).message).toBe(error.message);
  });

  it.each([
    ['a string', 'llama', TYPE, 'models of "x"'],
    ['an object', { 0: 'llama' }, TYPE, 'models of "x"'],
    ['null', null, TYPE, 'models of "x"'],
    ['a number element', ['llama', 3], TYPE, 'models[1] of "x"'],
    ['an empty name', ['llama', ''], VALUE, 'models[1] of "x"'],
  ])('models as %s names the field wherever instances declare models', (_, models, expected, field) => {
    const r = make({ instances: [{ id: 'x', models: ['qwen'] }] });
    for (const attempt of [
      () => make({ instances: [{ id: 'x', models: models as never }] }),
      () => make({ instances: [] }).addInstance('x', { models: models as never }),
      () => r.setInstanceModels('x', models as never),
    ]) {
      const error = thrown(attempt);
      expect(error).toMatchObject(expected);
      expect(error.message).toContain(field);
    }
    // Refused: nothing was declared or interned.
    expect(r.instanceModels('x')).toEqual(['qwen']);
    expect(r.models()).toEqual(['qwen']);
    expect(thrown(() => r.setInstanceModels('nope', []))).toMatchObject({ code: 'ERR_KVROUTE_UNKNOWN_INSTANCE' });
  });

  it('an unknown policy is a RangeError listing the known ones', () => {
    for (const attempt of [
      () => make({ policy: 'fastest' as never }),
      () => make().setPolicy('fastest' as never),
      () => make({ policy: { name: 'nope' } as never }),
    ]) {
      const error = thrown(attempt);
      expect(error).toMatchObject({ name: 'RangeError', code: 'ERR_KVROUTE_UNKNOWN_POLICY' });
      expect(error.message).toMatch(/policy.*unified_kv_both/);
    }
  });

  it.each([
    ['overloadFactor', { name: 'unified', overloadFactor: 'high' }, TYPE],
    ['affinityThreshold', { name: 'unified', affinityThreshold: 1.5 }, VALUE],
    ['decodeWeight', { name: 'lmetric', decodeWeight: -0.1 }, VALUE],
    ['ringVnodes', { name: 'session_hash', ringVnodes: 0.5 }, VALUE],
  ])('a bad policy tunable (%s) names the tunable', (field, policy, expected) => {
    const error = thrown(() => make({ policy: policy as never }));
    expect(error).toMatchObject(expected);
    expect(error.message).toContain(`options.policy.${field}`);
  });

  it('an unknown policy key (a misspelt tunable) is refused, naming it and the known keys', () => {
    for (const attempt of [
      () => make({ policy: { name: 'unified', bogusKey: 3 } as never }),
      () => make().setPolicy({ name: 'min_ttft', batchweight: 0.5 } as never),
    ]) {
      const error = thrown(attempt);
      expect(error).toMatchObject(VALUE);
      expect(error.message).toMatch(
        /policy has an unknown key "(bogusKey|batchweight)"; known: name, offload, .*batchWeight/,
      );
    }
  });

  it.each([0, -5, 1.5, NaN, Infinity])('a capacity of %s is a RangeError naming the field', (capacityBlocks) => {
    expect(thrown(() => make({ capacityBlocks }))).toMatchObject(VALUE);
    expect(thrown(() => make({ capacityBlocks })).message).toContain('options.capacityBlocks');
    expect(thrown(() => make().addInstance('x', { capacityBlocks })).message).toContain('capacityBlocks of "x"');
    expect(thrown(() => make().setCapacity('engine-0', capacityBlocks))).toMatchObject(VALUE);
    expect(thrown(() => make({ instances: [{ id: 'a', capacityBlocks }] })).message).toContain('capacityBlocks');
  });

  it('an unknown instance id is a RangeError for every instance operation', () => {
    const r = make();
    for (const use of [
      () => r.drainInstance('nope'),
      () => r.removeInstance('nope'),
      () => r.setObservedState('nope', { running: 1 }),
      () => r.removeBlocks('nope', [1]),
      () => r.clearBlocks('nope'),
      () => r.setCapacity('nope', 10),
    ]) {
      const error = thrown(use);
      expect(error).toMatchObject({ name: 'RangeError', code: 'ERR_KVROUTE_UNKNOWN_INSTANCE' });
      expect(error.message).toContain('"nope"');
    }
    expect(thrown(() => r.addInstance('engine-0'))).toMatchObject({ code: 'ERR_KVROUTE_DUPLICATE_INSTANCE' });
    expect(thrown(() => r.addInstance(''))).toMatchObject(VALUE);
    expect(thrown(() => r.addInstance(7 as never))).toMatchObject(TYPE);
    expect(thrown(() => make({ instances: ['a', 'a'] }))).toMatchObject({ code: 'ERR_KVROUTE_DUPLICATE_INSTANCE' });
  });

  it.each([
    ['options', null, TYPE],
    ['options.instances', { instances: 'four' }, TYPE],
    ['options.instances', { instances: -1 }, VALUE],
    ['options.instances[0]', { instances: [5] }, TYPE],
    ['options.blockSize', { blockSize: 0 }, VALUE],
    ['options.hashChunkBytes', { hashChunkBytes: 2.5 }, VALUE],
    ['options.stalenessMs', { stalenessMs: -1 }, VALUE],
    ['options.maxSessions', { maxSessions: 0 }, VALUE],
    ['options.clock', { clock: 'fast' }, VALUE],
    ['options.native', { native: 'yes' }, TYPE],
  ])('bad %s', (field, options, expected) => {
    const error = thrown(
      () => new Router(options === null ? (null as never) : ({ instances: 1, ...options } as never)),
    );
    expect(error).toMatchObject(expected);
    expect(error.message).toContain(field);
  });

  it('bad observed state names the field', () => {
    const r = make();
    expect(thrown(() => r.setObservedState('engine-0', { running: -1 })).message).toContain('state.running');
    expect(thrown(() => r.setObservedState('engine-0', { waiting: '1' as never }))).toMatchObject(TYPE);
    expect(thrown(() => r.setObservedState('engine-0', { timestampMs: NaN }))).toMatchObject(VALUE);
  });
});

/** A core's config as Router builds it (unified), for calling the cores directly. */
const CORE_CONFIG = {
  policy: toCorePolicy(resolvePolicy('unified')),
  blockTokens: 16,
  chunkBytes: 128,
  stalenessMs: 2000,
  maxSessions: 10,
  manualClock: true,
  feedPath: null,
};

describe('the addon re-checks what bypasses the TypeScript layer', () => {
  const { NativeRouter } = loadNative();
  const config = CORE_CONFIG;
  const buffers = () => ({
    request: Float64Array.of(NaN, 0, 0, -1, NaN),
    decision: new Int32Array(5),
    offload: new Float64Array(4),
    events: new Float64Array(9),
  });
  const core = () => {
    const c = new NativeRouter(config, buffers());
    c.setExplainBuffers(new Int32Array(8), new Float64Array(8));
    c.addInstance('a', 100);
    return c;
  };

  it.each([
    ['config', () => new NativeRouter(null as never, buffers()), TYPE],
    ['policy.kind', () => new NativeRouter({ ...config, policy: { ...config.policy, kind: 99 } }, buffers()), VALUE],
    [
      'policy.attentionWeight',
      () => new NativeRouter({ ...config, policy: { ...config.policy, attentionWeight: -1 } }, buffers()),
      VALUE,
    ],
    [
      'policy.tieTolerance',
      () => new NativeRouter({ ...config, policy: { ...config.policy, tieTolerance: NaN } }, buffers()),
      VALUE,
    ],
    ['blockSize', () => new NativeRouter({ ...config, blockTokens: 0 }, buffers()), VALUE],
    ['buffers.request', () => new NativeRouter(config, { ...buffers(), request: new Int32Array(2) as never }), TYPE],
    ['hashIds', () => core().route(123 as never, undefined), TYPE],
    ['hashIds', () => core().route(new Int16Array(2) as never, undefined), TYPE],
    ['session', () => core().route(undefined, 5 as never), TYPE],
    ['instance id', () => core().addInstance(5 as never, 10), TYPE],
    ['capacityBlocks', () => core().addInstance('b', 0), VALUE],
    ['capacityBlocks', () => core().addInstance('b', NaN), VALUE],
    ['slot', () => core().drainInstance(7), { name: 'RangeError', code: 'ERR_KVROUTE_UNKNOWN_INSTANCE' }],
    ['slot', () => core().removeInstance(-1), { name: 'RangeError', code: 'ERR_KVROUTE_UNKNOWN_INSTANCE' }],
    ['slot', () => core().stats('0' as never, new Float64Array(19)), TYPE],
    ['stats', () => core().stats(0, new Float64Array(2)), VALUE],
    ['observed', () => core().setObserved(0, new Float64Array(3)), VALUE],
    ['ticket', () => core().complete('x' as never), TYPE],
    [
      'inputTokens',
      () => {
        const b = buffers();
        const c = new NativeRouter(config, b);
        c.setExplainBuffers(new Int32Array(8), new Float64Array(8));
        b.request[0] = -4;
        return c.route(undefined, undefined);
      },
      VALUE,
    ],
  ])('%s', (field, use, expected) => {
    const error = thrown(use);
    expect(error).toMatchObject(expected);
    expect(error.message).toContain(field);
  });

  it('a wrong ids-kind hint is refused or misreads ids, never memory', () => {
    const b = buffers();
    const c = new NativeRouter(config, b);
    c.setExplainBuffers(new Int32Array(8), new Float64Array(8));
    c.addInstance('a', 100);
    b.request[2] = 1; // "a BigUint64Array"
    expect(thrown(() => c.route(new Uint32Array(3), undefined))).toMatchObject(TYPE); // 12 bytes: not u64s
    expect(c.route(new Uint32Array(4), undefined)).toBeGreaterThanOrEqual(0); // 16 bytes: read as 2 ids
    b.request[2] = 2; // "a Float64Array", but the bits of 1n are not an integer id
    expect(thrown(() => c.route(BigUint64Array.of(1n), undefined))).toMatchObject(VALUE);
    expect(c.checkInvariants()).toBe('');
  });

  it('garbage in the event queue is dropped, not read past the buffer', () => {
    const b = buffers();
    const c = new NativeRouter(config, b);
    c.setExplainBuffers(new Int32Array(8), new Float64Array(8));
    c.addInstance('a', 100);
    b.events[0] = 1e9;
    c.drainEvents();
    expect(b.events[0]).toBe(0);
    expect(c.checkInvariants()).toBe('');
  });
});

describe.each([
  { impl: 'native', Core: () => loadNative().NativeRouter },
  { impl: 'reference', Core: (): CoreRouterConstructor => ReferenceRouter },
])('both cores re-check model groups and blockTokens ($impl)', ({ Core }) => {
  const config = CORE_CONFIG;
  const setup = () => {
    const request = Float64Array.of(NaN, 0, 0, -1, NaN);
    const c = new (Core())(config, {
      request,
      decision: new Int32Array(5),
      offload: new Float64Array(4),
      events: new Float64Array(9),
    });
    c.setExplainBuffers(new Int32Array(8), new Float64Array(8));
    c.addInstance('a', 100);
    return { c, request };
  };

  it.each([
    ['groups', ({ c }: ReturnType<typeof setup>) => c.setInstanceGroups(0, [1] as never), TYPE],
    ['groups[1]', ({ c }: ReturnType<typeof setup>) => c.setInstanceGroups(0, Uint32Array.of(1, 65_536)), VALUE],
    [
      'slot',
      ({ c }: ReturnType<typeof setup>) => c.setInstanceGroups(3, null),
      { name: 'RangeError', code: 'ERR_KVROUTE_UNKNOWN_INSTANCE' },
    ],
    ['group', ({ c, request }: ReturnType<typeof setup>) => ((request[3] = 1), c.route(undefined, undefined)), VALUE],
    ['group', ({ c, request }: ReturnType<typeof setup>) => ((request[3] = 0.5), c.route(undefined, undefined)), VALUE],
    ['group', ({ c, request }: ReturnType<typeof setup>) => ((request[3] = -2), c.route(undefined, undefined)), VALUE],
    [
      'blockTokens',
      ({ c, request }: ReturnType<typeof setup>) => ((request[4] = 0.5), c.route(undefined, undefined)),
      VALUE,
    ],
    [
      'blockTokens',
      ({ c, request }: ReturnType<typeof setup>) => ((request[4] = 2 ** 24 + 1), c.route(undefined, undefined)),
      VALUE,
    ],
  ])('%s', (field, use, expected) => {
    const s = setup();
    const error = thrown(() => use(s));
    expect(error).toMatchObject(expected);
    expect(error.message).toContain(field);
    expect(s.c.checkInvariants()).toBe('');
  });

  it('a group becomes known once an instance declares it or a higher one', () => {
    const { c, request } = setup();
    c.setInstanceGroups(0, Uint32Array.of(3, 3, 2));
    request[3] = 1; // below 3: known, and served only by wildcards (there are none)
    expect(c.route(undefined, undefined)).toBe(-1);
    request[3] = 3;
    expect(c.route(undefined, undefined)).toBeGreaterThanOrEqual(0);
    request[3] = 4;
    expect(thrown(() => c.route(undefined, undefined))).toMatchObject(VALUE);
    expect(c.checkInvariants()).toBe('');
  });
});

describe('a route() function kept after its router is gone', () => {
  it('throws a clear error instead of touching freed memory', async () => {
    const { spawnSync } = await import('node:child_process');
    const native = new URL('../dist/core/native.js', import.meta.url).href;
    const policySpec = new URL('../dist/core/policy-spec.js', import.meta.url).href;
    const script = `
      import { loadNative } from ${JSON.stringify(native)};
      import { resolvePolicy, toCorePolicy } from ${JSON.stringify(policySpec)};
      const { NativeRouter } = loadNative();
      const config = { policy: toCorePolicy(resolvePolicy('unified')),
        blockTokens: 16, chunkBytes: 128, stalenessMs: 2000, maxSessions: 10, manualClock: true, feedPath: null };
      const make = () => {
        const c = new NativeRouter(config, {
          request: Float64Array.of(NaN, 0, 0, -1, NaN),
          decision: new Int32Array(5),
          offload: new Float64Array(4),
          events: new Float64Array(9),
        });
        c.setExplainBuffers(new Int32Array(8), new Float64Array(8));
        c.addInstance('a', 100);
        return c.route;
      };
      const route = make();
      route(undefined, undefined); // works while the router lives
      for (let k = 0; k < 50; k += 1) {
        globalThis.gc();
        await new Promise((resolve) => setImmediate(resolve));
        try { route(undefined, undefined); } catch (error) { console.log(error.message); process.exit(0); }
      }
      console.log('the router was never finalized');
      process.exit(1);`;
    const child = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(child.stderr).toBe('');
    expect(child.stdout.trim()).toBe('route() called on a router that has been finalized');
    expect(child.status).toBe(0);
  });
});
