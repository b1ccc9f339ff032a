/**
 * Counters and histograms for the proxy's per-request path: a request updates plain numbers in a
 * label set's cell, and prom-client reads the cells when scraped.
 *
 * Why not prom-client's own `inc`/`observe`: every call, even on a `labels(...)` child, validates
 * and hashes the label object (sorts names, joins values). Under load that was 7–10% of the
 * proxy's CPU in a profile; a cell update is an addition and, for a histogram, a bucket search.
 *
 * - Counters stay prom-client `Counter`s: their `collect()` hook, which prom-client calls on every
 *   scrape, copies the cells in (reset, then one `inc` per cell). Public API only.
 * - Histograms are registered as objects that implement the registry's metric contract (`name`,
 *   `help`, `type`, `aggregator`, `get()` giving prom-client's value shape), because a prom-client
 *   `Histogram` has no public way to set bucket counts. `test/hot-metrics.test.ts` checks the
 *   exposition against a real `Histogram` fed the same observations.
 *
 * Invariant: a cell is never removed, so values only grow (Prometheus counter semantics). Label
 * sets are bounded by the caller (instances × policies × reasons × statuses).
 */
import { Counter, type Histogram, type Registry } from 'prom-client';

type Labels = Record<string, string>;
/** What a prom-client `Histogram`'s `get()` resolves to (the typings do not export the name). */
type HistogramData = Awaited<ReturnType<Histogram<string>['get']>>;
type HistogramValue = HistogramData['values'][number];

/**
 * Memoizes one cell per label-value tuple, in one Map per label level (a trie), so a lookup
 * hashes each value once and builds no key string.
 */
class Cells<C> {
  private readonly root = new Map<string, unknown>();
  private readonly all: C[] = [];
  constructor(
    private readonly labelNames: readonly string[],
    private readonly make: (labels: Labels) => C,
  ) {
    if (labelNames.length === 0) throw new TypeError('a hot metric needs at least one label');
  }

  get(values: readonly string[]): C {
    if (values.length !== this.labelNames.length)
      throw new TypeError(`expected ${this.labelNames.length} label values (${this.labelNames.join(', ')})`);
    let level = this.root;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      let next = level.get(values[i]!) as Map<string, unknown> | undefined;
      if (next === undefined) level.set(values[i]!, (next = new Map()));
      level = next;
    }
    let cell = level.get(values[last]!) as C | undefined;
    if (cell === undefined) {
      const labels: Labels = {};
      this.labelNames.forEach((name, i) => (labels[name] = values[i]!));
      cell = this.make(labels);
      level.set(values[last]!, cell);
      this.all.push(cell);
    }
    return cell;
  }

  values(): readonly C[] {
    return this.all;
  }
}

export interface CounterCell {
  readonly labels: Labels;
  value: number;
}

export interface HotCounter {
  /** The cell of these label values (in `labelNames` order); add to its `value`, never subtract. */
  cell(...values: string[]): CounterCell;
}

export interface HotMetricConfig {
  name: string;
  help: string;
  labelNames: readonly string[];
  registry: Registry;
}

export function hotCounter(config: HotMetricConfig): HotCounter {
  const cells = new Cells<CounterCell>(config.labelNames, (labels) => ({ labels, value: 0 }));
  new Counter({
    name: config.name,
    help: config.help,
    labelNames: config.labelNames,
    registers: [config.registry],
    collect() {
      this.reset();
      for (const cell of cells.values()) this.inc(cell.labels, cell.value);
    },
  });
  return { cell: (...values) => cells.get(values) };
}

export class HistogramCell {
  /** Observations per bucket, not cumulative; the last slot counts those above every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Labels,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

export interface HotHistogram {
  cell(...values: string[]): HistogramCell;
}

export function hotHistogram(config: HotMetricConfig & { buckets: readonly number[] }): HotHistogram {
  const bounds = [...config.buckets].sort((a, b) => a - b);
  if (config.labelNames.includes('le')) throw new TypeError('le is reserved for histogram buckets');
  const cells = new Cells<HistogramCell>(config.labelNames, (labels) => new HistogramCell(labels, bounds));
  const exported = {
    name: config.name,
    help: config.help,
    type: 'histogram',
    aggregator: 'sum',
    // prom-client's value shape for a histogram: cumulative `_bucket` series with `le` (the bound
    // as a number, `+Inf` last), then `_sum` and `_count`, per label set.
    get(): Promise<HistogramData> {
      const values: HistogramValue[] = [];
      for (const cell of cells.values()) {
        let cumulative = 0;
        bounds.forEach((le, i) => {
          cumulative += cell.counts[i]!;
          values.push({ metricName: `${config.name}_bucket`, labels: { ...cell.labels, le }, value: cumulative });
        });
        values.push({ metricName: `${config.name}_bucket`, labels: { ...cell.labels, le: '+Inf' }, value: cell.count });
        values.push({ metricName: `${config.name}_sum`, labels: cell.labels, value: cell.sum });
        values.push({ metricName: `${config.name}_count`, labels: cell.labels, value: cell.count });
      }
      return Promise.resolve({
        name: config.name,
        help: config.help,
        // The typings declare `type` a numeric enum; at run time prom-client uses these strings.
        type: 'histogram' as unknown as HistogramData['type'],
        aggregator: 'sum',
        collect: () => undefined, // required by the typings of this shape; nothing reads it
        values,
      });
    },
  };
  // Hazard: the registry's parameter type names prom-client's four classes; it reads only the
  // fields above (metrics(), getMetricsAsJSON(), getSingleMetric(), merge()).
  config.registry.registerMetric(exported as unknown as Parameters<Registry['registerMetric']>[0]);
  return { cell: (...values) => cells.get(values) };
}
