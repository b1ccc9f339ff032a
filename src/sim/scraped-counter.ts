/**
 * A Prometheus counter read at scrape time from a cumulative total the model keeps: each
 * collect() adds what the total grew by since the last one. A total that goes back (a reset
 * model) adds nothing until it passes the last value reported, so the counter never decreases.
 */
import { Counter, type Registry } from 'prom-client';

export function scrapedCounter(registers: Registry[], name: string, help: string, read: () => number): void {
  let reported = 0;
  new Counter({
    name,
    help,
    registers,
    collect() {
      const total = read();
      if (total > reported) this.inc(total - reported);
      reported = total;
    },
  });
}
