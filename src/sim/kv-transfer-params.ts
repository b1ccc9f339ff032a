/**
 * vLLM's `kv_transfer_params` as the simulated engines read and write them (docs/sim-serve.md,
 * "Disaggregated prefill"; vLLM's NixlConnector is the model):
 *
 * In a request:
 * - absent, null, or neither flag true: an ordinary request;
 * - `do_remote_decode: true` (the prefill phase): prefill here and hold the KV for a decode
 *   engine; the other fields are ignored (the protocol sends them null);
 * - `do_remote_prefill: true` (the decode phase): the KV waits on the engine `remote_engine_id`
 *   (a non-empty string), in the blocks `remote_block_ids` (integers ≥ 0), reached at
 *   `remote_host`:`remote_port` (a string, an integer in [1, 65535]); `remote_request_id`
 *   (a string, newer vLLM) names the prefill request, and `tp_size` must be 1 when given
 *   (the simulated engines run TP 1).
 * Both flags true, a flag that is not a boolean, or a bad field is a 400 naming the field
 * (`kv_transfer_params.remote_port must be an integer in [1, 65535], got 0`). A JSON null counts
 * as absent, as everywhere in the OpenAI API.
 *
 * In the prefill phase's response: `RemoteDecodeParams`, vLLM's shape.
 */
import { invalidType, invalidValue } from '../core/errors.js';
import { checkInteger, checkObject, checkString } from '../core/validate.js';

export type KvTransferRequest =
  | { kind: 'none' }
  | { kind: 'remote-decode' }
  | {
      kind: 'remote-prefill';
      engineId: string;
      blockIds: number[];
      host: string;
      port: number;
      /** The prefill request's id, when the params carry it. */
      requestId: string | undefined;
    };

/** What the prefill phase answers with: the decode engine's request carries it back. */
export interface RemoteDecodeParams {
  do_remote_prefill: true;
  do_remote_decode: false;
  remote_engine_id: string;
  remote_block_ids: number[];
  remote_request_id: string;
  remote_host: string;
  remote_port: number;
  tp_size: 1;
}

const FIELD = 'kv_transfer_params';
const present = (value: unknown): boolean => value !== undefined && value !== null;

function flag(params: Record<string, unknown>, name: string): boolean {
  const value = params[name];
  if (!present(value)) return false;
  if (typeof value !== 'boolean') throw invalidType(`${FIELD}.${name}`, 'a boolean', value);
  return value;
}

function required(params: Record<string, unknown>, name: string, what: string): unknown {
  const value = params[name];
  if (!present(value))
    throw invalidType(`${FIELD}.${name}`, `${what} (required with ${FIELD}.do_remote_prefill)`, value);
  return value;
}

export function parseKvTransferParams(value: unknown): KvTransferRequest {
  if (!present(value)) return { kind: 'none' };
  const params = checkObject(FIELD, value);
  const decode = flag(params, 'do_remote_decode');
  const prefill = flag(params, 'do_remote_prefill');
  if (decode && prefill)
    throw invalidValue(`${FIELD}.do_remote_prefill`, `false when ${FIELD}.do_remote_decode is true`, true);
  if (decode) return { kind: 'remote-decode' };
  if (!prefill) return { kind: 'none' };

  const engineId = checkString(`${FIELD}.remote_engine_id`, required(params, 'remote_engine_id', 'a string'));
  if (engineId === '') throw invalidValue(`${FIELD}.remote_engine_id`, 'a non-empty engine id', engineId);
  const ids = required(params, 'remote_block_ids', 'an array of block ids');
  if (!Array.isArray(ids)) throw invalidType(`${FIELD}.remote_block_ids`, 'an array of block ids', ids);
  const blockIds = ids.map((id: unknown, i) => checkInteger(`${FIELD}.remote_block_ids[${i}]`, id, 0));
  const host = checkString(`${FIELD}.remote_host`, required(params, 'remote_host', 'a string'));
  const port = checkInteger(`${FIELD}.remote_port`, required(params, 'remote_port', 'a number'), 1, 65535);
  if (present(params.tp_size)) checkInteger(`${FIELD}.tp_size`, params.tp_size, 1, 1);
  const requestId = present(params.remote_request_id)
    ? checkString(`${FIELD}.remote_request_id`, params.remote_request_id)
    : undefined;
  return { kind: 'remote-prefill', engineId, blockIds, host, port, requestId };
}
