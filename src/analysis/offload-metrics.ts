/**
 * The prefill-offload figures of a run (issue #18, docs/offload.md), from its records: how many
 * requests were offloaded (their record names a `prefill_instance`), their mean TTFT, and what
 * their transfers moved. `kvroute sim run --json` and every sweep cell's summary.json carry them.
 *
 *   offloads               successful records with a prefill_instance
 *   offloaded_ttft_mean_s  mean of first_token − dispatch over those; null when none
 *   transfer_s_mean        mean transfer time over those; null when none
 *   transferred_tokens     Σ transferred_tokens over those
 *
 * One pass, O(records).
 */
import type { RequestRecord } from '../trace/records.js';
import { isFailed } from './run-metrics.js';

export interface OffloadMetrics {
  offloads: number;
  offloaded_ttft_mean_s: number | null;
  transfer_s_mean: number | null;
  transferred_tokens: number;
}

export function offloadMetrics(records: readonly RequestRecord[]): OffloadMetrics {
  let offloads = 0;
  let ttft = 0;
  let transfer = 0;
  let tokens = 0;
  for (const r of records) {
    if (r.prefill_instance === undefined || isFailed(r)) continue;
    offloads++;
    ttft += r.first_token - r.dispatch;
    transfer += r.transfer_s ?? 0;
    tokens += r.transferred_tokens ?? 0;
  }
  return {
    offloads,
    offloaded_ttft_mean_s: offloads === 0 ? null : ttft / offloads,
    transfer_s_mean: offloads === 0 ? null : transfer / offloads,
    transferred_tokens: tokens,
  };
}
