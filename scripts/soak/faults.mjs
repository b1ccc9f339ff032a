// @ts-check
/**
 * The fault scheduler: rounds of every fault kind in a seeded order, one fault at a time, spaced
 * evenly over the load phase (a round once begun is finished). Each fault is injected, held, undone, and then checked: "survived"
 * means the proxy is alive and the thing it hit is back in service (a backend healthy again, a KV
 * feed read again after its gap or reconnect, the admin change in force, a bad request answered).
 * Every fault's window [start, end] is kept, so report.mjs can tie each failed request to one.
 */
import { request } from 'undici';

import { clientAborts, malformedBodies, oversizedBodies, slowloris } from './abuse.mjs';
import { ADMIN_TOKEN } from './fleet.mjs';
import { metricSum, scrape } from './monitor.mjs';
import { shuffled, sleep, until } from './random.mjs';

/** Every kind the soak injects; `backend-cycle` injects admin-add, admin-drain and admin-remove in turn. */
export const FAULT_KINDS = [
  'engine-kill',
  'engine-stop',
  'kv-publisher-restart',
  'kv-drop',
  'admin-add',
  'admin-drain',
  'admin-remove',
  'policy-switch',
  'client-abort',
  'oversized-body',
  'malformed-body',
  'slowloris',
];
const SCHEDULED = FAULT_KINDS.filter((k) => !k.startsWith('admin-')).concat('backend-cycle');
const POLICIES = ['sticky', 'unified', 'round_robin', 'unified+A+B', 'load_only', 'min_ttft'];
/** How long a backend or a KV feed may take to come back after its fault is undone. */
const RECOVERY_MS = 20_000;

/**
 * @param {string} base
 * @param {'GET' | 'POST'} method
 * @param {string} path
 * @param {object} [body]
 */
async function admin(base, method, path, body) {
  const res = await request(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    headersTimeout: 10_000,
    bodyTimeout: 10_000,
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: text === '' ? {} : JSON.parse(text) };
}

/**
 * @param {string} base
 * @param {string} url
 * @returns {Promise<boolean>} whether the backend is in routing (healthy, not drained)
 */
async function backendServing(base, url) {
  const { body } = await admin(base, 'GET', '/admin/instances');
  const found = body.instances?.find((/** @type {any} */ i) => i.id === url || i.url === url);
  return found !== undefined && found.healthy === true && found.drained !== true;
}

/**
 * Requests straight to an engine (not through the proxy), with fresh prompts, so it publishes KV
 * events and a dropped message shows as a gap at the next one.
 * @param {string} url
 * @param {string} model
 */
async function nudge(url, model) {
  for (let i = 0; i < 3; i++) {
    const body = {
      model,
      messages: [{ role: 'user', content: `nudge ${Date.now()} ${i} ${'x'.repeat(200)}` }],
      max_tokens: 1,
    };
    const res = await request(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      headersTimeout: 10_000,
    });
    await res.body.text();
  }
}

/**
 * @param {string} base
 * @param {string} url the backend the feed belongs to
 */
async function feedState(base, url) {
  const metrics = await scrape(base);
  const label = `instance="${url}"`;
  return {
    fed: metricSum(metrics, 'kvroute_kv_events_fed', label),
    gaps: metricSum(metrics, 'kvroute_kv_events_gaps_total', label),
    messages: metricSum(metrics, 'kvroute_kv_events_messages_total', label),
  };
}

/**
 * The faults, bound to the soak's rig.
 * @param {{ base: string, model: string, engines: import('./fleet.mjs').Engine[], spare: import('./fleet.mjs').Engine,
 *   relays: import('./kv-relay.mjs').KvRelay[], ctx: import('./abuse.mjs').Ctx, random: () => number,
 *   hold: number, maxBodyBytes: number, proxyAlive: () => boolean }} rig
 */
export function faultActions(rig) {
  const pickEngine = () => Math.floor(rig.random() * rig.engines.length);
  const holdMs = (/** @type {number} */ ms) => Math.round(ms * rig.hold);
  /** @type {Record<string, () => Promise<{ kind: string, survived: boolean, detail: string }[]>>} */
  const actions = {
    'engine-kill': async () => {
      const engine = /** @type {import('./fleet.mjs').Engine} */ (rig.engines[pickEngine()]);
      await engine.kill();
      await sleep(holdMs(3000));
      await engine.start();
      const back = await until(() => backendServing(rig.base, engine.url), RECOVERY_MS);
      return [
        {
          kind: 'engine-kill',
          survived: back,
          detail: `${engine.url} SIGKILL, restarted; ${back ? 'healthy again' : 'not back'}`,
        },
      ];
    },
    'engine-stop': async () => {
      const engine = /** @type {import('./fleet.mjs').Engine} */ (rig.engines[pickEngine()]);
      engine.signal('SIGSTOP');
      await sleep(holdMs(4000));
      engine.signal('SIGCONT');
      const back = await until(() => backendServing(rig.base, engine.url), RECOVERY_MS);
      return [
        {
          kind: 'engine-stop',
          survived: back,
          detail: `${engine.url} SIGSTOP ${holdMs(4000)} ms; ${back ? 'healthy again' : 'not back'}`,
        },
      ];
    },
    'kv-publisher-restart': async () => {
      const i = pickEngine();
      const engine = /** @type {import('./fleet.mjs').Engine} */ (rig.engines[i]);
      await /** @type {import('./kv-relay.mjs').KvRelay} */ (rig.relays[i]).restart(holdMs(1000));
      const fed = await until(
        async () => {
          await nudge(engine.url, rig.model);
          return (await feedState(rig.base, engine.url)).fed === 1;
        },
        RECOVERY_MS,
        500,
      );
      return [
        {
          kind: 'kv-publisher-restart',
          survived: fed,
          detail: `relay of ${engine.url} down ${holdMs(1000)} ms; feed ${fed ? 'read again' : 'not back'}`,
        },
      ];
    },
    'kv-drop': async () => {
      const i = pickEngine();
      const engine = /** @type {import('./fleet.mjs').Engine} */ (rig.engines[i]);
      const before = await feedState(rig.base, engine.url);
      /** @type {import('./kv-relay.mjs').KvRelay} */ (rig.relays[i]).drop(2);
      const recovered = await until(
        async () => {
          await nudge(engine.url, rig.model);
          const now = await feedState(rig.base, engine.url);
          return now.gaps > before.gaps && now.fed === 1;
        },
        RECOVERY_MS,
        500,
      );
      return [
        {
          kind: 'kv-drop',
          survived: recovered,
          detail: `2 messages of ${engine.url} dropped; ${recovered ? 'gap seen, feed read again' : 'no recovery seen'}`,
        },
      ];
    },
    'backend-cycle': async () => {
      const spare = rig.spare;
      await spare.start();
      const added = await admin(rig.base, 'POST', '/admin/instances/add', { url: spare.url });
      const serving = added.status === 201 && (await until(() => backendServing(rig.base, spare.url), RECOVERY_MS));
      await sleep(holdMs(3000));
      const drained = await admin(rig.base, 'POST', '/admin/instances/drain', { url: spare.url });
      const out = drained.status === 200 && !(await backendServing(rig.base, spare.url));
      await sleep(holdMs(2000));
      const removed = await admin(rig.base, 'POST', '/admin/instances/remove', { url: spare.url });
      const listed = await admin(rig.base, 'GET', '/admin/instances');
      const gone = removed.status === 200 && !listed.body.instances.some((/** @type {any} */ b) => b.id === spare.url);
      await sleep(holdMs(2000)); // its in-flight requests finish before the engine goes
      await spare.stop();
      return [
        {
          kind: 'admin-add',
          survived: serving,
          detail: `add ${added.status}; ${serving ? 'in routing' : 'never healthy'}`,
        },
        {
          kind: 'admin-drain',
          survived: out,
          detail: `drain ${drained.status}; ${out ? 'out of routing' : 'still routed'}`,
        },
        {
          kind: 'admin-remove',
          survived: gone,
          detail: `remove ${removed.status}; ${gone ? 'forgotten' : 'still listed'}`,
        },
      ];
    },
    'policy-switch': async () => {
      const name = /** @type {string} */ (POLICIES[Math.floor(rig.random() * POLICIES.length)]);
      const set = await admin(rig.base, 'POST', '/admin/policy', { policy: name });
      const got = await admin(rig.base, 'GET', '/admin/policy');
      const ok = set.status === 200 && got.body.policy?.name === name;
      return [
        { kind: 'policy-switch', survived: ok, detail: `to ${name}: ${set.status}, now ${got.body.policy?.name}` },
      ];
    },
    'client-abort': async () => {
      const r = await clientAborts(rig.ctx, rig.random, 8, 150);
      return [{ kind: 'client-abort', survived: true, detail: `${r.aborted} of ${r.sent} aborted mid-request` }];
    },
    'oversized-body': async () => {
      const r = await oversizedBodies(rig.ctx, rig.maxBodyBytes);
      // Each shape answered as docs/proxy.md says: 413, or (10 digits under uWS) a silent close.
      const ok = r.every((x) => x.documented);
      return [
        {
          kind: 'oversized-body',
          survived: ok,
          detail: r.map((x) => `${x.shape} ${x.status || 'closed, no status'}`).join(', '),
        },
      ];
    },
    'malformed-body': async () => {
      const r = await malformedBodies(rig.ctx);
      const wrong = r.filter((x) => x.status < 400 || x.status >= 500 || x.status === 0);
      return [
        {
          kind: 'malformed-body',
          survived: wrong.length === 0,
          detail: `${r.length} shapes, ${r.length - wrong.length} answered 4xx`,
        },
      ];
    },
    slowloris: async () => {
      const completedBefore = rig.ctx.outcomes.completed;
      const r = await slowloris(rig.base, 4, holdMs(15_000), 500);
      const served = rig.ctx.outcomes.completed > completedBefore;
      return [
        {
          kind: 'slowloris',
          survived: served,
          detail: `${r.sockets} sockets, ${r.closedByProxy} closed by the proxy, longest held ${r.longestHeldMs} ms; load ${served ? 'kept flowing' : 'stalled'}`,
        },
      ];
    },
  };
  return actions;
}

/**
 * Runs rounds of every scheduled fault in a seeded order from `from` (ms epoch), one at a time,
 * starting them `spacingMs` apart, and starts no round that would not fit before `until`; a round
 * once begun is finished, and the first always runs, so every kind is injected at least once
 * however short the run.
 * @param {ReturnType<typeof faultActions>} actions
 * @param {{ random: () => number, from: number, until: number, spacingMs: number, proxyAlive: () => boolean, log: (line: string) => void }} plan
 */
export async function runFaults(actions, plan) {
  /** @type {{ kind: string, start: number, end: number, survived: boolean, detail: string }[]} */
  const injected = [];
  await sleep(Math.max(0, plan.from - Date.now()));
  let next = Date.now();
  // A new round starts only if it fits before `until` at the planned spacing (the first always runs).
  for (let round = 0; round === 0 || Date.now() + plan.spacingMs * SCHEDULED.length <= plan.until; round++) {
    for (const name of shuffled(SCHEDULED, plan.random)) {
      await sleep(Math.max(0, next - Date.now()));
      if (!plan.proxyAlive()) return injected;
      const start = Date.now();
      let results;
      try {
        results = await /** @type {() => Promise<{ kind: string, survived: boolean, detail: string }[]>} */ (
          actions[name]
        )();
      } catch (error) {
        results = [
          { kind: name, survived: false, detail: `the injection failed: ${/** @type {Error} */ (error).message}` },
        ];
      }
      const end = Date.now();
      for (const r of results) {
        const alive = plan.proxyAlive();
        injected.push({ ...r, survived: r.survived && alive, start, end });
        plan.log(
          `${((end - start) / 1000).toFixed(1).padStart(5)} s  ${r.kind.padEnd(21)} ${r.survived && alive ? 'survived' : 'NOT SURVIVED'}: ${r.detail}`,
        );
      }
      next = start + plan.spacingMs;
    }
  }
  return injected;
}
