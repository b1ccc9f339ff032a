/**
 * GET /v1/models and GET /v1/models/{id}, answered from what the proxy knows of its backends
 * (discovered from each one's /v1/models, or pinned by configuration; backend-monitor.ts), so
 * a client's model listing never waits on an engine.
 *
 * - The list is the union over the routable backends, one card per model id, the first backend
 *   to list an id giving its card (vLLM's carries `max_model_len`, `root`, `parent` for LoRA).
 *   No routable backend → 503.
 * - `{id}` may contain slashes (`Qwen/Qwen3-8B`) and arrives raw or percent-encoded; an id no
 *   backend serves is OpenAI's 404 `model_not_found`.
 */
import type { ClientRequestHead, ClientResponse } from './client-io.js';
import { noBackendError, sendClientError, sendJson } from './client-response.js';
import { ClientError, echo } from './error-body.js';
import type { ProxyState } from '../proxy-state.js';

const MODEL_PATH_PREFIX = '/v1/models/';

export function handleModels(res: ClientResponse, _req: ClientRequestHead, state: ProxyState): void {
  if (state.routableCount() === 0) {
    sendClientError(res, noBackendError());
    return;
  }
  sendJson(res, 200, JSON.stringify({ object: 'list', data: state.modelCards() }));
}

export function handleModel(res: ClientResponse, req: ClientRequestHead, state: ProxyState): void {
  const raw = req.getUrl().slice(MODEL_PATH_PREFIX.length);
  let id: string;
  try {
    id = decodeURIComponent(raw);
  } catch {
    sendClientError(
      res,
      new ClientError(400, `the model id in the path is not valid percent-encoding`, 'invalid_field'),
    );
    return;
  }
  const card = state.modelCards().find((m) => m.id === id);
  if (card !== undefined) sendJson(res, 200, JSON.stringify(card));
  else if (state.modelAvailability(id) === 'unavailable') sendClientError(res, noBackendError());
  else sendClientError(res, modelNotFound(id));
}

/** OpenAI's answer for a model nobody serves. */
export function modelNotFound(model: string): ClientError {
  return new ClientError(
    404,
    `The model \`${echo(model)}\` does not exist or is not served by any backend of this proxy.`,
    'model_not_found',
    'model',
  );
}
