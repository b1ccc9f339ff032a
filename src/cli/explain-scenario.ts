/**
 * The fleet `kvroute explain` explains a decision on: a JSON scenario, checked field by field
 * (every mistake names its field), built into a Router on the manual clock.
 *
 *   {
 *     "policy": "v3",                      NAME, NAME:KEY=VALUE…, or a PolicySpec object (default: the
 *                                          default policy, DEFAULT_POLICY, as serve and sim run)
 *     "blockSize": 16, "capacityBlocks": 65536,
 *     "instances": [
 *       { "id": "a", "models": ["qwen"], "drained": false,
 *         "cached": { "chat": 4096 },      leading tokens of each conversation it holds
 *         "state": { "running": 2, "decodeBatch": 2, "waiting": 0, "pendingPrefillTokens": 0 } }
 *     ],
 *     "before": [ { "conversation": "chat", "inputTokens": 512, "firstToken": true } ],
 *     "request": { "conversation": "chat", "inputTokens": 8192, "model": "qwen", "session": "s1" }
 *   }
 *
 * A conversation's prompt is one chain of blocks (its k-th block is the same in every request
 * of it), so `cached` and the requests' lengths say exactly what each instance holds. Building:
 * every instance's `cached` prefix is committed to it alone (the others drained meanwhile,
 * under load_only, so no policy state moves); then `state` is its observed engine state, fresh;
 * then the policy is set and `before` is routed for real, in order (`firstToken`: the request
 * has started decoding, and an offloaded one's prefill phase is over); `request` is explained
 * as a dry run.
 */
import { invalidType, invalidValue } from '../core/errors.js';
import { parsePolicyArg } from '../core/policy-arg.js';
import { DEFAULT_POLICY } from '../core/policy-spec.js';
import { Router } from '../core/router.js';
import type { ObservedState, PolicyName, PolicySpec, RouteRequest } from '../core/types.js';
import { checkInteger, checkObject, checkString } from '../core/validate.js';

export interface ScenarioRequest {
  conversation: string;
  inputTokens: number;
  model?: string;
  session?: string;
  firstToken: boolean;
}

export interface Scenario {
  policy: PolicyName | PolicySpec;
  blockSize: number;
  capacityBlocks: number;
  instances: Array<{
    id: string;
    models?: string[];
    drained: boolean;
    cached: Record<string, number>;
    state?: ObservedState;
  }>;
  before: ScenarioRequest[];
  request: ScenarioRequest;
}

const NOW_MS = 1_000_000;
const STATE_FIELDS = ['running', 'waiting', 'decodeBatch', 'pendingPrefillTokens', 'kvBlocksUsed', 'kvBlocksTotal'];

function checkKeys(field: string, o: Record<string, unknown>, known: readonly string[]): void {
  const unknown = Object.keys(o).find((key) => !known.includes(key));
  if (unknown !== undefined)
    throw invalidValue(`${field}.${unknown}`, `absent (known: ${known.join(', ')})`, o[unknown]);
}

function readRequest(field: string, raw: unknown): ScenarioRequest {
  const r = checkObject(field, raw);
  checkKeys(field, r, ['conversation', 'inputTokens', 'model', 'session', 'firstToken']);
  if (r.firstToken !== undefined && typeof r.firstToken !== 'boolean')
    throw invalidType(`${field}.firstToken`, 'true or false', r.firstToken);
  return {
    conversation: r.conversation === undefined ? 'chat' : checkString(`${field}.conversation`, r.conversation),
    inputTokens: checkInteger(`${field}.inputTokens`, r.inputTokens, 0, 1 << 24),
    model: r.model === undefined ? undefined : checkString(`${field}.model`, r.model),
    session: r.session === undefined ? undefined : checkString(`${field}.session`, r.session),
    firstToken: r.firstToken === true,
  };
}

function readInstance(field: string, raw: unknown): Scenario['instances'][number] {
  const i = checkObject(field, raw);
  checkKeys(field, i, ['id', 'models', 'drained', 'cached', 'state']);
  const cached: Record<string, number> = {};
  if (i.cached !== undefined) {
    for (const [conversation, tokens] of Object.entries(checkObject(`${field}.cached`, i.cached)))
      cached[conversation] = checkInteger(`${field}.cached.${conversation}`, tokens, 0, 1 << 24);
  }
  let state: ObservedState | undefined;
  if (i.state !== undefined) {
    const s = checkObject(`${field}.state`, i.state);
    checkKeys(`${field}.state`, s, STATE_FIELDS);
    state = { ...(s as ObservedState), timestampMs: NOW_MS };
  }
  if (i.models !== undefined && !Array.isArray(i.models))
    throw invalidType(`${field}.models`, 'an array of model names', i.models);
  if (i.drained !== undefined && typeof i.drained !== 'boolean')
    throw invalidType(`${field}.drained`, 'true or false', i.drained);
  return {
    id: checkString(`${field}.id`, i.id),
    models: i.models as string[] | undefined,
    drained: i.drained === true,
    cached,
    state,
  };
}

/** The scenario in `text`, checked; `policy` (the --policy flag) replaces its policy. */
export function readScenario(text: string, policy: PolicyName | PolicySpec | undefined): Scenario {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw invalidValue('scenario', 'JSON', (error as Error).message);
  }
  const s = checkObject('scenario', raw);
  checkKeys('scenario', s, ['policy', 'blockSize', 'capacityBlocks', 'instances', 'before', 'request']);
  if (!Array.isArray(s.instances) || s.instances.length === 0)
    throw invalidType('scenario.instances', 'a non-empty array of instances', s.instances);
  if (s.before !== undefined && !Array.isArray(s.before))
    throw invalidType('scenario.before', 'an array of requests', s.before);
  const given =
    typeof s.policy === 'string' ? parsePolicyArg(s.policy, 'scenario.policy') : (s.policy as PolicySpec | undefined);
  return {
    policy: policy ?? given ?? DEFAULT_POLICY,
    blockSize: s.blockSize === undefined ? 16 : checkInteger('scenario.blockSize', s.blockSize, 1, 1 << 24),
    capacityBlocks:
      s.capacityBlocks === undefined ? 65_536 : checkInteger('scenario.capacityBlocks', s.capacityBlocks, 1),
    instances: s.instances.map((i, k) => readInstance(`scenario.instances[${k}]`, i)),
    before: ((s.before as unknown[] | undefined) ?? []).map((r, k) => readRequest(`scenario.before[${k}]`, r)),
    request: readRequest('scenario.request', s.request),
  };
}

/** The route() request of `r`: its conversation's first ceil(inputTokens / blockSize) blocks. */
export function routeRequest(r: ScenarioRequest, blockSize: number, conversations: Map<string, number>): RouteRequest {
  if (!conversations.has(r.conversation)) conversations.set(r.conversation, conversations.size + 1);
  const base = conversations.get(r.conversation)! * 2 ** 32;
  const blocks = Math.ceil(r.inputTokens / blockSize);
  return {
    hashIds: Float64Array.from({ length: blocks }, (_, k) => base + k),
    inputTokens: r.inputTokens,
    model: r.model,
    session: r.session,
  };
}

/** The router in the scenario's state, `before` routed; the caller explains `request`. */
export function buildFleet(sc: Scenario, native?: boolean): { router: Router; conversations: Map<string, number> } {
  const router = new Router({
    instances: sc.instances.map(({ id, models }) => ({ id, models })),
    policy: 'load_only',
    blockSize: sc.blockSize,
    capacityBlocks: sc.capacityBlocks,
    clock: 'manual',
    native,
  });
  router.setTime(NOW_MS);
  const conversations = new Map<string, number>();
  const ids = sc.instances.map((i) => i.id);
  for (const inst of sc.instances) {
    for (const [conversation, tokens] of Object.entries(inst.cached)) {
      if (tokens === 0) continue;
      for (const other of ids) if (other !== inst.id) router.drainInstance(other);
      const seed = routeRequest({ conversation, inputTokens: tokens, firstToken: false }, sc.blockSize, conversations);
      router.complete(router.route({ ...seed, model: undefined }));
      for (const other of ids) if (other !== inst.id) router.resumeInstance(other);
    }
  }
  for (const inst of sc.instances) {
    if (inst.drained) router.drainInstance(inst.id);
    if (inst.state !== undefined) router.setObservedState(inst.id, inst.state);
  }
  router.setPolicy(sc.policy);
  for (const r of sc.before) {
    const ticket = router.route(routeRequest(r, sc.blockSize, conversations));
    const prefill = router.decision.offload.prefillTicket;
    if (!r.firstToken) continue;
    if (prefill >= 0) router.complete(prefill);
    router.onFirstToken(ticket);
  }
  return { router, conversations };
}
