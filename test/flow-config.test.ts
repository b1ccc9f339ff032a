/**
 * Flow control's pieces one by one (src/flow/): the config and its errors (each names the key),
 * a request's identity from its headers and its body's priority, the token buckets and per-tenant rate limits, the
 * controller's slots, queue bound and deadlines, and `serve --flow` / a YAML `flow:` section.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { resolveServeConfig } from '../src/cli/serve-config.js';
import { DEFAULT_FLOW_CONFIG, resolveFlowConfig, scaleRateLimits } from '../src/flow/flow-config.js';
import { FlowController } from '../src/flow/flow-controller.js';
import { apiKeyTenant, identify, type FlowHeaders } from '../src/flow/flow-identity.js';
import { RateLimits } from '../src/flow/rate-limits.js';
import { SessionTurns } from '../src/flow/session-turns.js';
import { TokenBucket } from '../src/flow/token-bucket.js';

const NO_HEADERS: FlowHeaders = { tenant: '', priority: '', deadline: '', authorization: '', apiKey: '' };

describe('resolveFlowConfig', () => {
  it('gives the defaults for nothing, and keeps what it is given', () => {
    expect(resolveFlowConfig(undefined)).toEqual(DEFAULT_FLOW_CONFIG);
    const config = resolveFlowConfig({
      classes: [
        { name: 'interactive', deadlineMs: 5_000 },
        { name: 'batch', starveAfterMs: 30_000 },
      ],
      defaultClass: 'batch',
      tenants: { acme: { weight: 2, rpm: 60, tpm: 100_000, tpmBurst: 20_000 } },
      tenantHeader: 'X-Team',
    });
    expect(config.classes).toEqual([
      { name: 'interactive', deadlineMs: 5_000, starveAfterMs: Infinity },
      { name: 'batch', starveAfterMs: 30_000 },
    ]);
    expect(config.tenantHeader).toBe('x-team');
    expect(config.tenants.acme).toEqual({ weight: 2, rpm: 60, tpm: 100_000, tpmBurst: 20_000 });
    // Its own output (JSON turns Infinity into null) reads back the same.
    expect(resolveFlowConfig(JSON.parse(JSON.stringify(config)))).toEqual(config);
  });

  it.each([
    [{ bogus: 1 }, /^flow: unknown key "bogus"; known: tenantHeader, /],
    [{ tenants: { a: { weight: 0 } } }, /^flow\.tenants\.a\.weight must be a number > 0, got 0$/],
    [{ tenants: { a: { rpmBurst: 5 } } }, /^flow\.tenants\.a\.rpmBurst needs flow\.tenants\.a\.rpm$/],
    [{ tenants: { 'bad name!': {} } }, /^flow\.tenants key must be 1 to 64 letters/],
    [{ classes: [] }, /^flow\.classes must be a list of 1 to 16 classes/],
    [{ classes: [{ name: 'a' }, { name: 'a' }] }, /^flow\.classes\[1\]\.name repeats "a"$/],
    [{ classes: [{ name: 'a', deadlineMs: -5 }] }, /^flow\.classes\[0\]\.deadlineMs must be an integer >= 1, got -5$/],
    [{ classes: [{ name: 'a' }] }, /^flow\.defaultClass must name one of the classes \(a\), got "normal"$/],
    [{ tenantHeader: 'bad header' }, /^flow\.tenantHeader must be a header name/],
    [{ apiKeyTenants: 'yes' }, /^flow\.apiKeyTenants must be true or false, got "yes"$/],
    [{ expectedOutputTokens: 1.5 }, /^flow\.expectedOutputTokens must be an integer >= 0, got 1\.5$/],
    [{ priorityBands: { high: -1 } }, /^flow\.priorityBands must be a list of up to 16 bands, lowest priorities first/],
    [
      { priorityBands: [{ upTo: 0, class: 'high', max: 1 }, { class: 'low' }] },
      /^flow\.priorityBands\[0\]: unknown key "max"; known: upTo, class$/,
    ],
    [
      { priorityBands: [{ upTo: 0, class: 'urgent' }, { class: 'low' }] },
      /^flow\.priorityBands\[0\]\.class must name one of the classes \(high, normal, low\), got "urgent"$/,
    ],
    [{ priorityBands: [{ upTo: 0 }, { class: 'low' }] }, /^flow\.priorityBands\[0\]\.class must be 1 to 64 letters/],
    [
      { priorityBands: [{ upTo: 0.5, class: 'high' }, { class: 'low' }] },
      /^flow\.priorityBands\[0\]\.upTo must be an integer \(every band but the last has one\), got 0\.5$/,
    ],
    [
      { priorityBands: [{ class: 'high' }, { class: 'low' }] },
      /^flow\.priorityBands\[0\]\.upTo must be an integer \(every band but the last has one\), got undefined$/,
    ],
    [
      { priorityBands: [{ upTo: 5, class: 'high' }, { upTo: 5, class: 'normal' }, { class: 'low' }] },
      /^flow\.priorityBands\[1\]\.upTo must be greater than flow\.priorityBands\[0\]\.upTo \(5\), got 5$/,
    ],
    [
      {
        priorityBands: [
          { upTo: -1, class: 'high' },
          { upTo: 10, class: 'low' },
        ],
      },
      /^flow\.priorityBands\[1\]\.upTo must be absent: the last band holds every priority above the one before it, got 10$/,
    ],
    ['tenants', /^flow must be an object, got "tenants"$/],
  ])('refuses %j naming the key', (raw, message) => {
    expect(() => resolveFlowConfig(raw)).toThrow(message);
  });

  it('maps the body’s priority by bands: derived from the classes by default, configurable, [] for none', () => {
    expect(resolveFlowConfig(undefined).priorityBands).toEqual([
      { upTo: -1, class: 'high' },
      { upTo: 0, class: 'normal' },
      { class: 'low' },
    ]);
    // Unset with classes of its own: negative → the highest, 0 → the default, positive → the lowest.
    const own = resolveFlowConfig({
      classes: [{ name: 'a' }, { name: 'b' }, { name: 'c' }, { name: 'd' }],
      defaultClass: 'c',
    });
    expect(own.priorityBands).toEqual([{ upTo: -1, class: 'a' }, { upTo: 0, class: 'c' }, { class: 'd' }]);
    const set = resolveFlowConfig({
      priorityBands: [
        { upTo: -10, class: 'high' },
        { upTo: 10, class: 'normal' },
        { class: 'low', upTo: null },
      ],
    });
    expect(set.priorityBands).toEqual([{ upTo: -10, class: 'high' }, { upTo: 10, class: 'normal' }, { class: 'low' }]);
    expect(resolveFlowConfig(JSON.parse(JSON.stringify(set)))).toEqual(set);
    expect(resolveFlowConfig({ priorityBands: [] }).priorityBands).toEqual([]);
    expect(resolveFlowConfig({ priorityBands: [{ class: 'low' }] }).priorityBands).toEqual([{ class: 'low' }]);
  });

  it('scales every rate limit by a thread’s share', () => {
    const config = resolveFlowConfig({
      tenants: { a: { rpm: 60, tpm: 1_000, tpmBurst: 400 } },
      tenantDefaults: { rpm: 10 },
    });
    const half = scaleRateLimits(config, 0.5);
    expect(half.tenants.a).toEqual({ weight: 1, rpm: 30, tpm: 500, tpmBurst: 200 });
    expect(half.tenantDefaults).toEqual({ weight: 1, rpm: 5 });
    expect(config.tenants.a!.rpm).toBe(60);
  });
});

describe('identify', () => {
  const config = resolveFlowConfig(undefined);

  it('takes the tenant header, else the API key’s hash, else the default tenant', () => {
    expect(identify({ ...NO_HEADERS, tenant: 'team-a', authorization: 'Bearer k' }, config).tenant).toBe('team-a');
    expect(identify({ ...NO_HEADERS, authorization: 'Bearer sk-1' }, config).tenant).toBe(apiKeyTenant('sk-1'));
    expect(identify({ ...NO_HEADERS, apiKey: 'sk-1' }, config).tenant).toBe(apiKeyTenant('sk-1'));
    expect(apiKeyTenant('sk-1')).not.toBe(apiKeyTenant('sk-2'));
    expect(identify(NO_HEADERS, config).tenant).toBe('default');
    expect(identify({ ...NO_HEADERS, authorization: 'Bearer sk-1' }, { ...config, apiKeyTenants: false }).tenant).toBe(
      'default',
    );
  });

  it('reads the class and deadline; bad values are errors naming the header', () => {
    expect(identify(NO_HEADERS, config)).toEqual({ tenant: 'default', classRank: 1, deadlineMs: undefined });
    expect(identify({ ...NO_HEADERS, priority: 'low', deadline: '2500' }, config)).toMatchObject({
      classRank: 2,
      deadlineMs: 2500,
    });
    expect(() => identify({ ...NO_HEADERS, priority: 'x'.repeat(10_000) }, config)).toThrow(
      /^x-kvroute-priority must be one of high, normal, low, got "x{64}"$/,
    );
    expect(() => identify({ ...NO_HEADERS, deadline: '-1' }, config)).toThrow(
      /^x-kvroute-deadline-ms must be a whole number/,
    );
    expect(() => identify({ ...NO_HEADERS, tenant: 'a b' }, config)).toThrow(/^x-kvroute-tenant must be 1 to 128/);
  });

  it('takes the body’s priority through the bands when the header is absent; the header wins', () => {
    const rank = (priority: number | undefined, header = '', c = config) =>
      identify({ ...NO_HEADERS, priority: header }, c, priority).classRank;
    // The default bands: vLLM's lower-is-earlier, 0 its default.
    expect([-1_000_000, -1, 0, 1, 2 ** 53].map((p) => rank(p))).toEqual([0, 0, 1, 2, 2]);
    expect(rank(undefined)).toBe(1);
    expect(rank(-1, 'low')).toBe(2);
    expect(rank(5, 'HIGH')).toBe(0);
    expect(() => rank(-1, 'urgent')).toThrow(/^x-kvroute-priority must be one of high, normal, low, got "urgent"$/);
    const banded = resolveFlowConfig({
      priorityBands: [{ upTo: -5, class: 'high' }, { upTo: 5, class: 'normal' }, { class: 'low' }],
    });
    expect([-6, -5, -4, 5, 6].map((p) => rank(p, '', banded))).toEqual([0, 0, 1, 1, 2]);
    // No bands: the body's priority picks nothing, the default class stands.
    const none = resolveFlowConfig({ priorityBands: [] });
    expect([-1, 0, 1].map((p) => rank(p, '', none))).toEqual([1, 1, 1]);
  });

  it('matches class names in any case, the default class too', () => {
    const gold = resolveFlowConfig({ classes: [{ name: 'Gold' }, { name: 'Tin' }], defaultClass: 'Gold' });
    expect(identify(NO_HEADERS, gold).classRank).toBe(0);
    expect(identify({ ...NO_HEADERS, priority: ' tin ' }, gold).classRank).toBe(1);
  });
});

describe('TokenBucket and RateLimits', () => {
  it('refills at its rate up to its burst, and tells how long until an amount is there', () => {
    const bucket = new TokenBucket(10, 60, 0); // 1 per second, 10 at once
    expect(bucket.waitMs(10, 0)).toBe(0);
    bucket.take(10, 0);
    expect(bucket.waitMs(1, 0)).toBe(1_000);
    expect(bucket.waitMs(3, 1_500)).toBe(1_500);
    expect(bucket.available(100_000)).toBe(10);
    // Overdrawn by output: nothing until it refills past zero.
    bucket.charge(15, 100_000);
    expect(bucket.available(100_000)).toBe(-5);
    expect(bucket.waitMs(1, 100_000)).toBe(6_000);
    // An amount above the burst waits for a full bucket, never forever.
    expect(bucket.waitMs(50, 100_000)).toBe(15_000);
  });

  it('limits each tenant by requests and tokens, charges output, and takes new limits live', () => {
    let limits: Record<string, { rpm?: number; tpm?: number; tpmBurst?: number }> = {
      a: { rpm: 2, tpm: 600, tpmBurst: 300 },
    };
    const rates = new RateLimits((tenant) => limits[tenant] ?? {});
    expect(rates.admit('a', 100, 0)).toBeUndefined();
    expect(rates.admit('a', 250, 0)).toEqual({ limit: 'tpm', retryAfterMs: 5_000 });
    expect(rates.admit('a', 100, 0)).toBeUndefined();
    expect(rates.admit('a', 1, 0)).toEqual({ limit: 'rpm', retryAfterMs: 30_000 });
    expect(rates.admit('free', 1e9, 0)).toBeUndefined();
    rates.chargeOutput('a', 400, 60_000);
    expect(rates.remaining('a', 60_000)).toEqual({ requests: 2, tokens: -100 });
    limits = { a: { rpm: 100 } };
    rates.reconfigure(60_000);
    expect(rates.remaining('a', 60_000)).toEqual({ requests: 2, tokens: undefined });
    expect(rates.remaining('free', 0)).toEqual({ requests: undefined, tokens: undefined });
  });
});

describe('FlowController', () => {
  const entry = (tenant: string, extra = {}) => ({ tenant, classRank: 1, cost: 10, inputTokens: 10, ...extra });

  it('holds active ≤ maxInFlight, bounds the queue, and expires waiters at their deadline', () => {
    const flow = new FlowController<string>(resolveFlowConfig({ classes: [{ name: 'normal', deadlineMs: 100 }] }), {
      maxInFlight: 1,
      queueSize: 2,
      queueTimeoutMs: 60_000,
    });
    const c = (tenant: string, extra = {}) => ({ ...entry(tenant, extra), classRank: 0 });
    expect(flow.enter('a', c('t'), 0)).toEqual({ kind: 'go' });
    expect(flow.enter('b', c('t'), 0).kind).toBe('queued');
    expect(flow.enter('c', c('t', { deadlineMs: 30 }), 10).kind).toBe('queued');
    expect(flow.enter('d', c('t'), 10)).toEqual({
      kind: 'refused',
      refusal: { cause: 'queue_full', retryAfterMs: 1_000 },
    });
    expect(flow.nextDeadline()).toBe(40);
    expect(flow.expired(40).map((r) => r.payload)).toEqual(['c']);
    flow.leave('t', 10, 50);
    expect(flow.next(50)?.payload).toBe('b');
    expect(flow.active).toBe(1);
    flow.leave('t', 10, 60);
    expect(flow.next(60)).toBeUndefined();
    expect(flow.active).toBe(0);
    expect(flow.expired(1_000)).toEqual([]);
  });

  it('refuses the class list changing live, and applies a new weight', () => {
    const flow = new FlowController<string>(resolveFlowConfig(undefined), {
      maxInFlight: 1,
      queueSize: 10,
      queueTimeoutMs: 1_000,
    });
    expect(() => flow.configure(resolveFlowConfig({ classes: [{ name: 'normal' }] }), 0)).toThrow(
      /cannot change while serving/,
    );
    flow.configure(resolveFlowConfig({ tenants: { a: { weight: 5 } } }), 0);
    expect(flow.tenant('a').weight).toBe(5);
    expect(flow.tenant('b').weight).toBe(1);
  });
});

describe('SessionTurns', () => {
  it('calls a turn a continuation when its session’s last turn ended within the window', () => {
    const turns = new SessionTurns(1_000, 2);
    expect(turns.arriving('s', 0)).toBe(false);
    turns.ended('s', 100);
    expect(turns.arriving('s', 900)).toBe(true);
    expect(turns.arriving('s', 950)).toBe(false); // consumed: one continuation per ended turn
    turns.ended('s', 1_000);
    expect(turns.arriving('s', 2_500)).toBe(false); // past the window
    turns.ended('a', 0);
    turns.ended('b', 0);
    turns.ended('c', 0); // bounded at 2: `a` is forgotten
    expect(turns.arriving('a', 1)).toBe(false);
    expect(turns.arriving('c', 1)).toBe(true);
  });
});

describe('serve --flow and a YAML flow: section', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-flow-'));

  it('reads a flow file, and names the file and key of a bad one', () => {
    const good = join(dir, 'flow.yaml');
    writeFileSync(good, 'tenants:\n  acme:\n    weight: 3\n    rpm: 120\n');
    expect(resolveServeConfig({ flow: good }, {}).proxy.flow).toMatchObject({
      tenants: { acme: { weight: 3, rpm: 120 } },
    });
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'tenants:\n  acme:\n    wieght: 3\n');
    expect(() => resolveServeConfig({ flow: bad }, {})).toThrow(
      `--flow ${bad}: flow.tenants.acme: unknown key "wieght"`,
    );
    expect(() => resolveServeConfig({}, { KVROUTE_FLOW: join(dir, 'missing.yaml') })).toThrow(
      /^KVROUTE_FLOW: cannot read .*missing\.yaml \(ENOENT\)$/,
    );
  });

  it('takes an inline flow: section of the serve config', () => {
    const file = join(dir, 'kvroute.yaml');
    writeFileSync(
      file,
      'max-in-flight: 8\nflow:\n  classes:\n    - name: gold\n  defaultClass: gold\n  tenants:\n    a: { tpm: -1 }\n',
    );
    expect(() => resolveServeConfig({ config: file }, {})).toThrow(
      `config ${file}: flow.tenants.a.tpm must be a number > 0, got -1`,
    );
  });
});
