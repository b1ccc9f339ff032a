// @ts-check
/**
 * Optional per-request steps for the floor relay (`bench/proxy-floor.mjs --steps a,b,…`): the work
 * any cache-aware router has to do for a request, which the bare relay leaves out. Added one at a
 * time by `bench/proxy-steps.ts`, they show what each costs in CPU under real load, so kvroute's
 * figure can be compared with "the floor plus the work it cannot skip".
 *
 * - headers: kvroute's own `readIncomingHead()` (from `dist/`): the client's headers to forward
 *   upstream and the session header; the relay writes them into its request head.
 * - parse: `JSON.parse` the body, check `model`, copy `hash_ids` into a Float64Array (the
 *   router's id form) or, without them, take `messages`. A body the step cannot read is relayed
 *   anyway (round-robin).
 * - route: kvroute's native `Router` (from `dist/`; both need `npm run build` first) picks the backend
 *   by those ids (or hashes the messages) and the session, policy `unified`; the ticket completes
 *   when the response ends and is aborted when it fails. Needs `parse`.
 */

export const STEP_NAMES = /** @type {const} */ (['headers', 'parse', 'route']);

/**
 * @typedef {{
 *   forwarded?: string,
 *   session?: string,
 *   ticket?: number,
 * }} StepState  What the steps keep on one exchange.
 *
 * @typedef {{
 *   readHead?: (req: import('uWebSockets.js').HttpRequest, state: StepState) => void,
 *   pick?: (body: Buffer, state: StepState) => number | undefined,
 *   finish?: (state: StepState, ok: boolean) => void,
 * }} Steps  Hooks the relay calls: in the uWS handler, once the body is whole, when the exchange ends.
 */

/**
 * The hooks for `names` (a subset of STEP_NAMES) over `backendCount` backends.
 * @param {readonly string[]} names
 * @param {number} backendCount
 * @returns {Promise<Steps>}
 */
export async function floorSteps(names, backendCount) {
  for (const name of names)
    if (!(/** @type {readonly string[]} */ (STEP_NAMES).includes(name)))
      throw new Error(`--steps: unknown step "${name}" (known: ${STEP_NAMES.join(', ')})`);
  if (names.includes('route') && !names.includes('parse')) throw new Error('--steps: route needs parse');
  /** @type {Steps} */
  const steps = {};
  if (names.includes('headers')) {
    const { readIncomingHead } = await import('../../dist/proxy/exchange/forward-headers.js');
    const { DEFAULT_FLOW_CONFIG } = await import('../../dist/flow/flow-config.js');
    const { AGENT_SESSION_HEADERS, sessionHeaderRanks } = await import('../../dist/proxy/exchange/session-headers.js');
    const sessionRanks = sessionHeaderRanks('x-session-id', AGENT_SESSION_HEADERS);
    steps.readHead = (req, state) => {
      const head = readIncomingHead(req, sessionRanks, DEFAULT_FLOW_CONFIG);
      let forwarded = '';
      for (let i = 0; i + 1 < head.headers.length; i += 2)
        forwarded += `${head.headers[i]}: ${head.headers[i + 1]}\r\n`;
      if (head.session !== '') state.session = head.session;
      state.forwarded = forwarded;
    };
  }
  if (!names.includes('parse')) return steps;

  const router = names.includes('route') ? await nativeRouter(backendCount) : undefined;
  steps.pick = (body, state) => {
    /** @type {unknown} */
    let parsed;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      return undefined;
    }
    const request = /** @type {{ model?: unknown, hash_ids?: unknown, messages?: unknown }} */ (parsed);
    if (typeof request.model !== 'string') return undefined;
    /** @type {import('../../dist/index.js').RouteRequest} */
    const route = state.session === undefined ? {} : { session: state.session };
    if (Array.isArray(request.hash_ids)) {
      const source = request.hash_ids;
      const ids = new Float64Array(source.length);
      for (let i = 0; i < ids.length; i++) ids[i] = Number(source[i]);
      route.hashIds = ids;
    } else if (Array.isArray(request.messages))
      route.messages = /** @type {import('../../dist/index.js').ChatMessage[]} */ (request.messages);
    else return undefined;
    if (router === undefined) return undefined;
    state.ticket = router.route(route);
    return Number(router.decision.instance);
  };
  if (router !== undefined)
    steps.finish = (state, ok) => {
      if (state.ticket === undefined) return;
      if (ok) {
        router.onFirstToken(state.ticket);
        router.complete(state.ticket);
      } else router.abort(state.ticket);
      state.ticket = undefined;
    };
  return steps;
}

/** kvroute's Router over instances named "0".."n-1" (the backends' indexes), native addon. @param {number} n */
async function nativeRouter(n) {
  const { Router } = await import('../../dist/index.js');
  const router = new Router({ instances: Array.from({ length: n }, (_, i) => String(i)), policy: 'unified' });
  if (!router.native) throw new Error('--steps route: the native addon is not built (npm run build)');
  return router;
}
