/**
 * The decode phase of vLLM's disaggregated prefill on a simulated engine (docs/sim-serve.md,
 * "Disaggregated prefill"): a request with `kv_transfer_params.do_remote_prefill` finds its KV
 * on the prefill engine, waits while it moves, then is served holding it as cached.
 *
 * `claimRemotePrefill` checks the params against the fleet, in order, each failure a 400 naming
 * the field: the engine `remote_engine_id` is in this fleet; it listens at `remote_host`:
 * `remote_port`; it holds unclaimed KV under `remote_request_id` (or, without one, in exactly
 * `remote_block_ids`); those are the hold's block ids; and the hold is this request's prompt (its
 * length and block ids). It then claims the hold and times the transfer: the tokens this engine
 * lacks now (EngineModel.lackedTokens: it keeps its own cached prefix) over the fleet's link,
 * cold on the first transfer from that engine to this one.
 *
 * `awaitTransfer` waits that long in engine time (RealtimeEngine.after, so scaled by --speed),
 * then releases the prefill engine's blocks and calls `done`. If the client goes away first, it
 * cancels the wait, releases the prefill engine's blocks and calls `aborted`: nothing is left.
 */
import type { ServerResponse } from 'node:http';

import { ApiError, type CompletionRequest } from './completion-request.js';
import type { EngineModel } from './engine-model.js';
import { sameIds, type KvHold } from './kv-holds.js';
import type { KvPeer, KvTransferPeers } from './kv-peers.js';
import type { KvTransferRequest } from './kv-transfer-params.js';
import type { RealtimeEngine } from './realtime-engine.js';

export interface RemotePrefillPlan {
  source: KvPeer;
  hold: KvHold;
  /** Tokens of KV moved: what this engine lacked. */
  tokens: number;
  /** Engine seconds the transfer takes. */
  seconds: number;
  cold: boolean;
}

const bad = (field: string, message: string): ApiError =>
  new ApiError(400, 'BadRequestError', `kv_transfer_params.${field}: ${message}`);

export function claimRemotePrefill(
  params: Extract<KvTransferRequest, { kind: 'remote-prefill' }>,
  request: CompletionRequest,
  self: { engineId: string; engine: EngineModel },
  peers: KvTransferPeers,
): RemotePrefillPlan {
  const source = peers.get(params.engineId);
  if (source === undefined)
    throw bad('remote_engine_id', `no engine ${JSON.stringify(params.engineId)} in this simulated fleet`);
  if (params.host !== source.host)
    throw bad('remote_host', `engine ${source.engineId} listens on ${source.host}, not ${params.host}`);
  if (params.port !== source.port)
    throw bad('remote_port', `engine ${source.engineId} listens on port ${source.port}, not ${params.port}`);
  const hold = source.holds.find(params.requestId, params.blockIds);
  if (hold === undefined)
    throw bad(
      params.requestId === undefined ? 'remote_block_ids' : 'remote_request_id',
      `engine ${source.engineId} holds no KV for it (never prefilled there, already transferred, or expired)`,
    );
  if (!sameIds(hold.blockIds, params.blockIds))
    throw bad('remote_block_ids', `are not the blocks engine ${source.engineId} holds for request ${hold.requestId}`);
  const prefilled = hold.sequence.request;
  if (prefilled.inputLength !== request.inputTokens || !sameIds(prefilled.hashIds, request.hashIds))
    throw bad(
      'remote_block_ids',
      `hold the KV of another prompt (${prefilled.inputLength} tokens), not this request's (${request.inputTokens} tokens)`,
    );
  source.holds.claim(hold);
  const tokens = self.engine.lackedTokens({ hashIds: request.hashIds, inputLength: request.inputTokens });
  const { ms, cold } = peers.link.transfer(source.engineId, self.engineId, tokens);
  return { source, hold, tokens, seconds: ms / 1000, cold };
}

/** Waits out the transfer (see the header); `done` or `aborted` is called once. */
export function awaitTransfer(
  plan: RemotePrefillPlan,
  res: ServerResponse,
  realtime: RealtimeEngine,
  done: () => void,
  aborted: () => void,
): void {
  const onClose = (): void => {
    cancel();
    plan.source.holds.release(plan.hold);
    aborted();
  };
  const cancel = realtime.after(plan.seconds, () => {
    res.off('close', onClose);
    plan.source.holds.release(plan.hold);
    done();
  });
  res.once('close', onClose);
}
