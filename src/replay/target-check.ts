/**
 * Before a replay sends anything: is the target up, and which model does it serve? A target
 * that is down is a ReplayError naming the URL and the cause, raised before any record file is
 * created, so a failed start leaves nothing half-written.
 */
import type { KvrouteError } from '../core/errors.js';

/** A target that cannot be driven (down at start, or dead mid-run). Exit status 2. */
export class ReplayError extends Error implements KvrouteError {
  readonly code = 'ERR_KVROUTE_REPLAY_TARGET' as const;
  constructor(message: string) {
    super(message);
    this.name = 'ReplayError';
  }
}

const CHECK_TIMEOUT_MS = 5_000;

function cause(error: unknown): string {
  const e = error as { cause?: { code?: string; message?: string }; name?: string; message?: string };
  return (
    e.cause?.code ?? e.cause?.message ?? (e.name === 'TimeoutError' ? 'no answer in 5 s' : (e.message ?? 'failed'))
  );
}

/**
 * GETs `/health`, then `/v1/models`; resolves with `model`, or the first model the target
 * lists. Throws ReplayError when neither answers, or when no model is given nor listed.
 */
export async function checkTarget(target: string, model: string | undefined): Promise<string> {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new ReplayError(`--target must be a URL such as http://127.0.0.1:8000, got ${target}`);
  }
  const base = url.href.replace(/\/+$/, '');
  const get = async (path: string): Promise<Response | string> => {
    try {
      return await fetch(`${base}${path}`, { signal: AbortSignal.timeout(CHECK_TIMEOUT_MS) });
    } catch (error) {
      return cause(error);
    }
  };
  const health = await get('/health');
  const models = await get('/v1/models');
  if (typeof health === 'string' && typeof models === 'string')
    throw new ReplayError(`the target ${base} is not reachable (GET /health: ${health}); is it running?`);
  if (typeof health !== 'string') await health.body?.cancel();
  let listed: string | undefined;
  if (typeof models !== 'string' && models.ok) {
    const body = (await models.json().catch(() => undefined)) as { data?: Array<{ id?: unknown }> } | undefined;
    const id = body?.data?.[0]?.id;
    if (typeof id === 'string') listed = id;
  } else if (typeof models !== 'string') await models.body?.cancel();
  if (typeof health !== 'string' && !health.ok && listed === undefined)
    throw new ReplayError(`the target ${base} is not healthy: GET /health answered ${health.status}`);
  const chosen = model ?? listed;
  if (chosen === undefined)
    throw new ReplayError(`the target ${base} lists no model at GET /v1/models; name one with --model`);
  return chosen;
}
