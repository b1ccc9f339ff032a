/**
 * `kvroute sim serve --shm NAME`: the simulated engines publish their true state into the
 * engine-state feed every `periodMs`, as an engine-side hook would (docs/shm-layout.md). Slot i
 * is engine i; its instance id is the engine's host:port.
 */
import type { SimFleet } from '../sim/sim-fleet.js';
import { StateFeedWriter } from '../state/shm-feed.js';

export function publishFleetState(fleet: SimFleet, shm: string, periodMs: number): { path: string; stop(): void } {
  const writer = new StateFeedWriter(shm, { slots: fleet.engines.length });
  const ids = fleet.urls.map((url) => new URL(url).host);
  const publish = (): void => {
    fleet.engines.forEach((server, slot) => {
      const model = server.realtime.engine;
      const state = model.state();
      writer.publish(slot, ids[slot]!, {
        ...state,
        prefixCacheQueries: model.counters.prefixQueries,
        prefixCacheHits: model.counters.prefixHits,
      });
    });
  };
  publish();
  const timer = setInterval(publish, periodMs);
  return {
    path: writer.path,
    stop() {
      clearInterval(timer);
      writer.close();
    },
  };
}
