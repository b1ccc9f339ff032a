/**
 * GET /v1/models: the union of what the routable backends serve, deduplicated by model id
 * (the first backend to list an id wins), as OpenAI's `{"object":"list","data":[…]}`.
 *
 * Each backend is asked in parallel with short timeouts; one that fails or answers garbage is
 * left out (the passive breaker, not this route, decides health). None routable → 503, none
 * answering → 502. The client's Authorization header is forwarded (engines started with
 * --api-key want it). Hazard: the response is written after awaits, so it is corked, and only
 * if the client is still there.
 */

import type { ClientRequestHead, ClientResponse } from './client-io.js';
import type { Backend } from './backend.js';
import { noBackendError, sendClientError, sendJson, serverError } from './client-response.js';
import type { ProxyState } from './proxy-state.js';

const MODELS_TIMEOUT_MS = 5_000;

async function modelsOf(backend: Backend, authorization: string): Promise<Array<{ id: string }> | undefined> {
  try {
    const { statusCode, body } = await backend.pool.request({
      path: `${backend.basePath}/v1/models`,
      method: 'GET',
      headers: authorization === '' ? undefined : { authorization },
      headersTimeout: MODELS_TIMEOUT_MS,
      bodyTimeout: MODELS_TIMEOUT_MS,
    });
    if (statusCode !== 200) {
      await body.dump();
      return undefined;
    }
    const list = (await body.json()) as { data?: unknown };
    if (!Array.isArray(list.data)) return undefined;
    return list.data.filter(
      (m): m is { id: string } => typeof m === 'object' && m !== null && typeof (m as { id?: unknown }).id === 'string',
    );
  } catch {
    return undefined;
  }
}

export function handleModels(res: ClientResponse, req: ClientRequestHead, state: ProxyState): void {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  const authorization = req.getHeader('authorization');
  const backends = state.list().filter((b) => b.healthy && !b.drained);
  if (backends.length === 0) {
    sendClientError(res, noBackendError());
    return;
  }
  void Promise.all(backends.map((b) => modelsOf(b, authorization))).then((lists) => {
    if (aborted) return;
    const answered = lists.filter((l) => l !== undefined);
    if (answered.length === 0) {
      sendJson(res, 502, serverError('no backend answered GET /v1/models', 'upstream_error'));
      return;
    }
    const seen = new Map<string, { id: string }>();
    for (const list of answered) for (const model of list) if (!seen.has(model.id)) seen.set(model.id, model);
    sendJson(res, 200, JSON.stringify({ object: 'list', data: [...seen.values()] }));
  });
}
