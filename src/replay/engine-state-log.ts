/**
 * `--engine-state URL,…`: each engine's Prometheus `/metrics` (vLLM's or SGLang's names, read by
 * state/engine-metrics-scrape.ts) scraped every `intervalMs` during a replay, one JSON line per
 * engine per scrape, to OUT.engine-state (docs/records.md):
 *
 *   {"t":12.003,"engine":0,"url":"http://…","running":3,"waiting":0,"kv_usage":0.41,
 *    "prefix_cache_queries":123456,"prefix_cache_hits":98000}
 *   {"t":13.004,"engine":1,"url":"http://…","error":"GET /metrics failed: ECONNREFUSED"}
 *
 * `t` is seconds on the replay clock (the records' clock), taken when the scrape was answered.
 *
 * Invariants: a scrape never overlaps the previous one of the same round (a slow engine delays
 * the next round, it does not pile up requests); stop() waits for the round in flight, then
 * closes the file; writes are synchronous lines, so a killed run leaves whole lines but maybe
 * the last.
 */
import { closeSync, openSync, writeSync } from 'node:fs';

import { ioError } from '../trace/trace-errors.js';
import { scrapeEngine } from '../state/engine-metrics-scrape.js';

export interface EngineStateLogOptions {
  path: string;
  urls: readonly string[];
  intervalMs: number;
  /** Seconds since the replay's start. */
  clock: () => number;
}

export class EngineStateLog {
  private readonly fd: number;
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> = Promise.resolve();
  lines = 0;

  constructor(private readonly options: EngineStateLogOptions) {
    try {
      this.fd = openSync(options.path, 'w');
    } catch (error) {
      throw ioError(options.path, error);
    }
    const tick = (): void => {
      this.round = this.scrapeAll().finally(() => {
        if (this.timer !== undefined) this.timer = setTimeout(tick, options.intervalMs);
      });
    };
    this.timer = setTimeout(tick, 0);
  }

  private async scrapeAll(): Promise<void> {
    const o = this.options;
    const timeout = Math.max(250, o.intervalMs);
    await Promise.all(
      o.urls.map(async (url, engine) => {
        const scrape = await scrapeEngine(url, timeout);
        const t = Math.round(o.clock() * 1000) / 1000;
        const line =
          typeof scrape === 'string'
            ? { t, engine, url, error: scrape }
            : {
                t,
                engine,
                url,
                running: scrape.counts.running,
                waiting: scrape.counts.waiting,
                kv_usage: scrape.counts.kvBlocksUsed / scrape.counts.kvBlocksTotal,
                prefix_cache_queries: scrape.counts.prefixCacheQueries,
                prefix_cache_hits: scrape.counts.prefixCacheHits,
              };
        writeSync(this.fd, `${JSON.stringify(line)}\n`);
        this.lines++;
      }),
    );
  }

  /** Ends the scraping after the round in flight, and closes the file. */
  async stop(): Promise<void> {
    const timer = this.timer;
    this.timer = undefined;
    clearTimeout(timer);
    await this.round;
    closeSync(this.fd);
  }
}
