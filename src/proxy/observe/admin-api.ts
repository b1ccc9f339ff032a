/**
 * The admin API: a ProxyMount serving /admin/*.
 *
 *   GET  /admin/state                  policy, every backend (health, drain, in-flight) and router stats
 *   GET  /admin/instances              the backends, each with its learned costs (`costs`)
 *   POST /admin/instances/add          {"url": "http://h:8000", "models"?: […]} → 201, in routing once its probe passes
 *   POST /admin/instances/drain        {"url": …}                 → no new requests; in-flight ones finish
 *   POST /admin/instances/remove       {"url": …}                 → forgotten; in-flight ones finish
 *   GET  /admin/policy                 the live policy
 *   POST /admin/policy                 {"policy": "sticky"} or a policy spec → switched live
 *   GET  /admin/flow                   flow control: its config, and per tenant what waits and what its limits hold
 *   POST /admin/flow                   {"flow": a flow config} → validated (400 naming the key), applied live on every thread
 *   GET  /admin/costs                  --costs, and per instance its learned estimate and the price in force
 *   GET  /admin/explain                router.explain() of the last decision or dry run (candidates, scores, terms)
 *   POST /admin/explain                {"request": a RouteRequest} → where it would go and why (a dry run)
 *
 * Security: without a token every /admin route answers 403 (the API is off). With one, a request
 * must carry `Authorization: Bearer <token>`; anything else gets 401 with `WWW-Authenticate`.
 * Tokens are compared in constant time: both sides are hashed to SHA-256 digests of equal length
 * and compared with crypto.timingSafeEqual, so neither the length nor a matching prefix leaks
 * through timing.
 *
 * A known /admin path with the wrong method gets 405 with Allow (the route table's rule).
 *
 * Input: a body over MAX_ADMIN_BODY gets 413 naming the limit, at once, and the connection is
 * closed (its unread rest is never buffered); a body that is not JSON 400. A policy spec with a
 * key that is no policy field (`bogusKey`) gets 400 naming it and listing the known ones, rather
 * than a 200 that silently ignored it. Messages quote client values through echo().
 *
 * Each backend in a reply carries `name` beside its `id` (its URL): the name client error bodies
 * use for it (exchange/upstream-errors.ts), so an operator can tell which one a client meant.
 *
 * Hazard (uWS): the request object is valid only inside the handler, so the Authorization header
 * is read before any await; a body arrives in onData chunks that are copied before the callback
 * returns; after onAborted nothing touches the response.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

import { isKvrouteError } from '../../core/errors.js';
import { POLICY_NAMES, POLICY_SPEC_KEYS } from '../../core/policy-spec.js';
import type { PolicyName, PolicySpec, RouteRequest } from '../../core/types.js';
import type { ClientResponse } from '../server/client-io.js';
import { backendName } from '../exchange/upstream-errors.js';
import { echo, errorJson } from '../server/error-body.js';
import { FlowConfigError, resolveFlowConfig } from '../../flow/flow-config.js';
import { shedBoundMs } from '../../flow/load-shedder.js';
import { normaliseBackend, resolveBackend, type ProxyMount, type ResolvedBackend } from '../proxy-options.js';
import type { BackendSnapshot, ProxyState } from '../proxy-state.js';
import type { MountApp } from '../server/route-table.js';

/** Admin request bodies are a URL or a policy: this is generous. */
export const MAX_ADMIN_BODY = 64 * 1024;

/** The keys a policy spec may have: its name, the offload layer, and the tunables. */

interface Reply {
  /** The status line, e.g. `201 Created`. */
  status: string;
  /** The serialized JSON body. */
  json: string;
  headers?: Record<string, string>;
  /** Close the connection after it (a body left unread). */
  close?: boolean;
}

/** A body the admin API refuses before it is parsed: its reply. */
class RefusedBody {
  constructor(readonly reply: Reply) {}
}

const ok = (body: unknown): Reply => ({ status: '200 OK', json: JSON.stringify(body) });
const refuse = (status: string, message: string, headers?: Record<string, string>): Reply => ({
  status,
  json: errorJson(message, status.startsWith('5') ? 'server_error' : 'invalid_request_error', null),
  ...(headers === undefined ? {} : { headers }),
});

/** A ProxyMount for /admin/*; `token` undefined turns the API off (403). */
export function adminMount(token: string | undefined): ProxyMount {
  const expected = token === undefined ? undefined : digest(token);
  return (app: MountApp, state: ProxyState) => {
    const route = (method: 'get' | 'post', path: string, handle: (body: unknown) => Reply | Promise<Reply>) => {
      app[method](path, (res, req) => {
        let aborted = false;
        res.onAborted(() => (aborted = true));
        const send = (reply: Reply) => {
          if (aborted) return;
          res.cork(() => {
            res.writeStatus(reply.status).writeHeader('content-type', 'application/json');
            for (const [name, value] of Object.entries(reply.headers ?? {})) res.writeHeader(name, value);
            res.end(reply.json, reply.close === true);
          });
        };
        const refused = authorize(expected, req.getHeader('authorization'));
        if (refused !== undefined) {
          if (method === 'post') res.onData(() => {}); // let the body drain; answered below
          send(refused);
          return;
        }
        const run = (body: unknown) =>
          Promise.resolve()
            .then(() => handle(body))
            .then(send, (error: unknown) => send(failure(error)));
        if (method === 'get') {
          void run(undefined);
          return;
        }
        readJson(res, (body) => (body instanceof RefusedBody ? send(body.reply) : void run(body)));
      });
    };

    route('get', '/admin/state', () =>
      ok({ policy: state.router.policy, backends: named(state), router: state.router.stats() }),
    );
    route('get', '/admin/instances', () => ok({ instances: withCosts(state) }));
    route('get', '/admin/costs', () => ok(costsOf(state)));
    route('get', '/admin/explain', () => ok({ explanation: state.router.explain() }));
    route('post', '/admin/explain', (body) => ok({ explanation: state.router.explain(requestField(body)) }));
    route('post', '/admin/instances/add', (body) => {
      const { id, models } = backendSpec(body);
      if (state.backend(id) !== undefined) return refuse('409 Conflict', `backend ${echo(id)} already exists`);
      void state.addBackend(id, models); // it takes requests once its first health probe passes
      return { ...ok({ added: id, instances: named(state) }), status: '201 Created' };
    });
    route('post', '/admin/instances/drain', (body) => {
      const id = knownBackend(state, body);
      if (typeof id !== 'string') return id;
      state.drainBackend(id);
      return ok({ drained: id, instances: named(state) });
    });
    route('post', '/admin/instances/remove', (body) => {
      const id = knownBackend(state, body);
      if (typeof id !== 'string') return id;
      // Answer once the backend is out of routing; its in-flight requests finish in the background.
      state.removeBackend(id).catch(() => {});
      return ok({ removed: id, instances: named(state) });
    });
    route('get', '/admin/flow', () => ok(flowOf(state)));
    route('post', '/admin/flow', (body) => {
      const raw = (body as { flow?: unknown } | null)?.flow;
      if (raw === undefined) throw new AdminInputError('the body must be {"flow": {…}} (docs/flow-control.md)');
      // Applied here at once; the other threads take it with the next ThreadState.
      state.admission.configure(resolveFlowConfig(raw, 'flow'));
      return ok(flowOf(state));
    });
    route('get', '/admin/policy', () => ok({ policy: state.router.policy }));
    route('post', '/admin/policy', (body) => {
      state.setPolicy(policyField(body));
      return ok({ policy: state.router.policy });
    });
  };
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** undefined when allowed; else the refusal. */
function authorize(expected: Buffer | undefined, header: string): Reply | undefined {
  if (expected === undefined)
    return refuse('403 Forbidden', 'the admin API is off: start kvroute serve with --admin-token');
  const match = /^Bearer\s+(.+)$/i.exec(header);
  const given = digest(match?.[1]?.trim() ?? '');
  if (match !== null && timingSafeEqual(given, expected)) return undefined;
  return refuse(
    '401 Unauthorized',
    match === null ? 'the admin API needs Authorization: Bearer <token>' : 'the admin token is wrong',
    { 'www-authenticate': 'Bearer realm="kvroute admin"' },
  );
}

/**
 * Reads a JSON body (at most MAX_ADMIN_BODY bytes); hands a RefusedBody for anything else: 413 as
 * soon as the body passes the limit (the rest is not read: the reply closes the connection), 400
 * when it is not JSON.
 */
function readJson(res: ClientResponse, done: (body: unknown) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let refused = false;
  res.onData((chunk, isLast) => {
    if (refused) return;
    size += chunk.byteLength;
    if (size > MAX_ADMIN_BODY) {
      refused = true;
      chunks.length = 0;
      const message = `the admin request body is over its limit of ${MAX_ADMIN_BODY} bytes`;
      return done(new RefusedBody({ ...refuse('413 Payload Too Large', message), close: true }));
    }
    chunks.push(Buffer.from(chunk.slice(0))); // copy: uWS reuses the chunk after this returns
    if (!isLast) return;
    try {
      done(JSON.parse(Buffer.concat(chunks).toString('utf8')));
    } catch {
      done(new RefusedBody(refuse('400 Bad Request', 'the admin request body is not valid JSON')));
    }
  });
}

/** The backends as replies show them: each with its client-facing name. */
function named(state: ProxyState): Array<BackendSnapshot & { name: string }> {
  return state.snapshot().map((b) => ({ ...b, name: backendName(b.id) }));
}

class AdminInputError extends Error {}

/** The body's `url`, normalised as the proxy keys backends. */
function backendField(body: unknown): string {
  const url = (body as { url?: unknown } | null)?.url;
  if (typeof url !== 'string' || url === '')
    throw new AdminInputError('the body must be {"url": "http://host:port"}: field url is missing or not a string');
  try {
    return normaliseBackend(url, 'url');
  } catch (error) {
    throw new AdminInputError((error as Error).message);
  }
}

/** The body of /admin/instances/add: `{url, models?}` (models pinned, else discovered). */
function backendSpec(body: unknown): ResolvedBackend {
  const id = backendField(body);
  try {
    return resolveBackend({ url: id, models: (body as { models?: unknown }).models }, 'body');
  } catch (error) {
    throw new AdminInputError((error as Error).message);
  }
}

/** The body's backend id, or a 404 reply when the proxy has no such backend. */
function knownBackend(state: ProxyState, body: unknown): string | Reply {
  const id = backendField(body);
  return state.backend(id) === undefined ? refuse('404 Not Found', `backend ${echo(id)} is not known`) : id;
}

function policyField(body: unknown): PolicyName | PolicySpec {
  const policy = (body as { policy?: unknown } | null)?.policy;
  if (typeof policy === 'string') return policy as PolicyName;
  if (typeof policy === 'object' && policy !== null && !Array.isArray(policy)) {
    const unknown = Object.keys(policy).find((key) => !POLICY_SPEC_KEYS.includes(key));
    if (unknown !== undefined)
      throw new AdminInputError(
        `policy has an unknown key ${JSON.stringify(echo(unknown))}; known: ${POLICY_SPEC_KEYS.join(', ')}`,
      );
    return policy as PolicySpec;
  }
  throw new AdminInputError(
    `the body must be {"policy": NAME or {"name": NAME, …}}; names: ${POLICY_NAMES.join(', ')}`,
  );
}

/** The backends, each with its learned cost estimate (proxy-costs.ts). */
function withCosts(state: ProxyState): unknown[] {
  const estimates = state.costs.estimates();
  return named(state).map((b) => (estimates[b.id] === undefined ? b : { ...b, costs: estimates[b.id] }));
}

/** GET /admin/costs: the mode, and per instance what was learned and what min_ttft prices it with. */
function costsOf(state: ProxyState): Record<string, unknown> {
  const instances: Record<string, unknown> = {};
  for (const [id, learned] of Object.entries(state.costs.estimates()))
    instances[id] = { learned, inForce: state.router.instanceCosts(id) };
  return { costs: state.costs.mode, instances };
}

/** GET /admin/flow: the config (whole-process limits), the queue, and per tenant what waits and what is left. */
function flowOf(state: ProxyState): Record<string, unknown> {
  const flow = state.admission.flow;
  const now = performance.now();
  const classes = flow.flowConfig.classes.map((c) => c.name);
  const tenants: Record<string, { waiting: Record<string, number>; remaining?: unknown }> = {};
  for (const [tenant, rank, waiting] of flow.depths()) {
    tenants[tenant] ??= { waiting: {} };
    tenants[tenant].waiting[classes[rank]!] = waiting;
  }
  for (const tenant of Object.keys(flow.flowConfig.tenants)) {
    tenants[tenant] ??= { waiting: {} };
    tenants[tenant].remaining = flow.remaining(tenant, now);
  }
  return {
    flow: state.admission.config,
    active: flow.active,
    queued: flow.queued,
    refused: state.admission.refused,
    // Load shedding: the fleet's predicted TTFT it decides on now and each class's bound (null: off, or no prediction yet).
    shedding:
      flow.flowConfig.shedding === undefined
        ? null
        : {
            predictedTtftMs: flow.predictedTtftMs(now) ?? null,
            boundsMs: Object.fromEntries(classes.map((name, rank) => [name, shedBoundMs(flow.flowConfig, rank)])),
          },
    tenants,
  };
}

/** The body of POST /admin/explain: `{request: RouteRequest}`. */
function requestField(body: unknown): RouteRequest {
  const request = (body as { request?: unknown } | null)?.request;
  if (typeof request !== 'object' || request === null || Array.isArray(request))
    throw new AdminInputError('the body must be {"request": {"prompt" | "hashIds" | "tokens" | "messages", …}}');
  return request as RouteRequest;
}

/** A failed admin operation: the caller's mistake (bad field, unknown policy) is 400, anything else 500. */
function failure(error: unknown): Reply {
  const message = error instanceof Error ? error.message : String(error);
  if (
    error instanceof AdminInputError ||
    error instanceof FlowConfigError ||
    isKvrouteError(error) ||
    error instanceof RangeError
  )
    return refuse('400 Bad Request', message);
  return refuse('500 Internal Server Error', message);
}
