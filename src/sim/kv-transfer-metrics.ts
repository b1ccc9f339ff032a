/**
 * A simulated engine's KV transfer counters and their Prometheus form (docs/sim-serve.md,
 * "Disaggregated prefill"; kvroute's own names, vLLM exports no such metrics):
 *
 *   kvroute_sim_kv_transfers_total{connection}         transfers this engine received (decode side),
 *                                                      connection "warm" or "cold" (a pair's first)
 *   kvroute_sim_kv_transfer_seconds_total{connection}  engine seconds they took
 *   kvroute_sim_kv_transferred_tokens_total            tokens of KV they moved
 *   kvroute_sim_kv_transfers_aborted_total             decode requests whose client left mid-transfer
 *   kvroute_sim_kv_held_requests                       prefilled requests whose KV waits for a decode
 *                                                      engine (prefill side, a gauge)
 *   kvroute_sim_kv_holds_expired_total                 holds freed unclaimed after the timeout
 *
 * Counters are read from these fields at scrape time (collect callbacks), like the engine's own.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

import { scrapedCounter } from './scraped-counter.js';

export interface KvTransferCounters {
  transfers: { warm: number; cold: number };
  seconds: { warm: number; cold: number };
  tokens: number;
  aborted: number;
}

export function kvTransferCounters(): KvTransferCounters {
  return { transfers: { warm: 0, cold: 0 }, seconds: { warm: 0, cold: 0 }, tokens: 0, aborted: 0 };
}

/** What the metrics read of the engine's holds. */
export interface KvHoldsView {
  readonly size: number;
  readonly expired: number;
}

export function registerKvTransferMetrics(registry: Registry, counters: KvTransferCounters, holds: KvHoldsView): void {
  const registers = [registry];
  const byConnection = (name: string, help: string, read: (connection: 'warm' | 'cold') => number): void => {
    const reported = { warm: 0, cold: 0 };
    new Counter({
      name,
      help,
      labelNames: ['connection'],
      registers,
      collect() {
        for (const connection of ['warm', 'cold'] as const) {
          const total = read(connection);
          this.inc({ connection }, total - reported[connection]);
          reported[connection] = total;
        }
      },
    });
  };
  const counter = (name: string, help: string, read: () => number): void => scrapedCounter(registers, name, help, read);
  byConnection(
    'kvroute_sim_kv_transfers_total',
    'KV transfers received from a prefill engine (disaggregated prefill), by connection: cold on a pair’s first.',
    (c) => counters.transfers[c],
  );
  byConnection(
    'kvroute_sim_kv_transfer_seconds_total',
    'Engine seconds spent waiting for KV transfers, by connection.',
    (c) => counters.seconds[c],
  );
  counter('kvroute_sim_kv_transferred_tokens_total', 'Tokens of KV received by transfer.', () => counters.tokens);
  counter(
    'kvroute_sim_kv_transfers_aborted_total',
    'Decode requests whose client went away while their KV was in transfer.',
    () => counters.aborted,
  );
  counter(
    'kvroute_sim_kv_holds_expired_total',
    'Prefilled KV freed unclaimed after the hold timeout.',
    () => holds.expired,
  );
  new Gauge({
    name: 'kvroute_sim_kv_held_requests',
    help: 'Prefilled requests whose KV this engine holds for a decode engine.',
    registers,
    collect() {
      this.set(holds.size);
    },
  });
}
