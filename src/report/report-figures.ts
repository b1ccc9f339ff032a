/**
 * The report's figures as Vega-Lite specifications, built from a ReportInput (report-input.ts).
 *
 * Why Vega-Lite: a declarative, well-kept charting grammar whose compiler and renderer run in
 * Node with no canvas and no browser; render-svg.ts turns each spec into static SVG at report
 * time, so the page needs no script and no network to show them.
 *
 * Each figure is either drawn (a spec and a caption saying what it shows) or omitted with the
 * reason (the input lacks its data): the report says so instead of drawing an empty chart.
 * Figures, in order: latency per policy; APC against the trace's ceilings; APC against hotspot
 * index; per-worker TTFT p90; slow-cause breakdown; KV footprint CDF; reuse decomposition;
 * interference against prefill size; engine-state ablation (TTFT p90 per policy and state).
 *
 * Legibility: runs sit on the y axis (horizontal labels that cannot collide), each run keeps
 * one colour across figures and the best run is starred (run-style.ts), text is 12 px and
 * every figure fits a 1400 px page unscaled (test/report-legibility.test.ts holds all three).
 *
 * Cost: O(cells × instances + CDF points), all tiny next to reading the input.
 */
import type { ReportCell, ReportInput } from './report-input.js';
import { BEST_RUN_CRITERION, bestLegendLabel, bestRunId, runAxis, runScale } from './run-style.js';

/** A Vega-Lite top-level specification (its own types are not loaded until render time). */
export type VegaLiteSpec = Record<string, unknown>;

export interface DrawnFigure {
  id: string;
  title: string;
  caption: string;
  spec: VegaLiteSpec;
}

export interface OmittedFigure {
  id: string;
  title: string;
  omitted: string;
}

export type Figure = DrawnFigure | OmittedFigure;

export function isDrawn(figure: Figure): figure is DrawnFigure {
  return 'spec' in figure;
}

const WIDTH = 640;
const HEIGHT = 260;
/** Pixels per run on a run axis: room for three bars, or one label of 12 px text. */
const RUN_STEP = 26;
/** Every text in a figure: at least this size (px), so the page reads at 100 % zoom. */
const FONT = 12;

/** What every spec shares: inline data, no title (the page's heading names the figure), legible text. */
function base(rows: object[]): VegaLiteSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    data: { values: rows },
    config: {
      font: 'sans-serif',
      view: { stroke: null },
      axis: { labelFontSize: FONT, titleFontSize: FONT + 1, labelLimit: 240 },
      header: { labelFontSize: FONT + 1, titleFontSize: FONT + 1 },
      legend: { labelLimit: 240, labelFontSize: FONT, titleFontSize: FONT, symbolSize: 120 },
    },
  };
}

/** The label a cell is shown under: its id, which names policy (and state or mode) in a sweep. */
const label = (cell: ReportCell): string => cell.id;

function latency(input: ReportInput): Figure {
  const id = 'latency';
  const title = 'Latency per policy';
  const metrics = [
    ['ttft_s', 'TTFT (s)'],
    ['tpot_ms', 'TPOT (ms)'],
    ['e2e_s', 'E2E (s)'],
  ] as const;
  const rows = input.cells.flatMap((cell) =>
    metrics.flatMap(([key, metric]) =>
      (['p50', 'p90', 'p99'] as const).map((q) => ({
        cell: label(cell),
        metric,
        quantile: q,
        value: cell.summary[key][q],
      })),
    ),
  );
  return {
    id,
    title,
    caption:
      'Time to first token, time per output token and end-to-end latency, at p50, p90 and p99, per run. ' +
      `Each panel has its own scale.${bestNote(input)}`,
    spec: {
      ...base(rows),
      facet: { column: { field: 'metric', type: 'nominal', title: null, sort: metrics.map(([, m]) => m) } },
      spec: {
        width: 250,
        height: { step: RUN_STEP, for: 'position' },
        mark: 'bar',
        encoding: {
          y: runAxis(input),
          yOffset: { field: 'quantile', type: 'nominal' },
          x: { field: 'value', type: 'quantitative', title: null, axis: { tickCount: 5 } },
          color: {
            field: 'quantile',
            type: 'nominal',
            title: 'quantile',
            scale: { scheme: 'blues', domain: ['p50', 'p90', 'p99'] },
          },
          tooltip: [{ field: 'cell' }, { field: 'quantile' }, { field: 'value', format: '.3~g' }],
        },
      },
      resolve: { scale: { x: 'independent' } },
    },
  };
}

/** The caption's sentence on the highlighted run, or nothing with one run. */
function bestNote(input: ReportInput): string {
  const best = bestRunId(input.cells);
  return best === undefined ? '' : ` ★ marks the best run, ${best}: ${BEST_RUN_CRITERION}.`;
}

function apcCeiling(input: ReportInput): Figure {
  const id = 'apc-ceiling';
  const title = 'APC against the ceiling';
  const trace = input.traceSummary;
  if (trace === undefined)
    return { id, title, omitted: 'no trace characterization (trace_summary in sweep.json) gives the ceilings' };
  const bars = input.cells.map((cell) => ({ cell: label(cell), apc: cell.summary.apc }));
  const ceilings = [
    { ceiling: 'any-session ceiling', value: trace.apc_ceiling.any_session.token_ratio },
    { ceiling: 'intra-session ceiling', value: trace.apc_ceiling.intra_session.token_ratio },
  ];
  const percent = { format: '.0%' };
  return {
    id,
    title,
    caption:
      'Achieved prompt-cache hit rate (cached ÷ input tokens) per run, against the trace’s theoretical ceilings: ' +
      'a perfect cache shared by all sessions (any-session) and one per session (intra-session).' +
      bestNote(input),
    spec: {
      ...base(bars),
      width: WIDTH,
      height: { step: RUN_STEP },
      layer: [
        {
          mark: 'bar',
          encoding: {
            y: runAxis(input),
            x: { field: 'apc', type: 'quantitative', title: 'APC', axis: percent, scale: { domain: [0, 1] } },
            color: { field: 'cell', type: 'nominal', legend: null, scale: runScale(input) },
            tooltip: [{ field: 'cell' }, { field: 'apc', format: '.1%' }],
          },
        },
        {
          data: { values: ceilings },
          mark: { type: 'rule', strokeDash: [6, 3], strokeWidth: 2 },
          encoding: {
            x: { field: 'value', type: 'quantitative' },
            stroke: { field: 'ceiling', type: 'nominal', title: null, scale: { range: ['#c2410c', '#15803d'] } },
          },
        },
      ],
      resolve: { scale: { color: 'independent' } },
    },
  };
}

/**
 * A legend, not a label per point: the points of a sweep sit close together and their labels
 * overlapped. Colour is the run (run-style.ts), shape its engine state; a ring marks the best.
 */
function apcHotspot(input: ReportInput): Figure {
  const id = 'apc-hotspot';
  const title = 'APC against hotspot index';
  const best = bestRunId(input.cells);
  const rows = input.cells
    .filter((cell) => cell.summary.hotspot_index !== null && cell.summary.hotspot_index !== undefined)
    .map((cell) => ({
      cell: label(cell),
      state: cell.engine_state ?? cell.mode ?? 'run',
      apc: cell.summary.apc,
      hotspot: cell.summary.hotspot_index,
      best: label(cell) === best,
    }));
  if (rows.length < 2)
    return { id, title, omitted: 'fewer than two runs with a hotspot index: there is no trade-off to plot' };
  const x = { field: 'hotspot', type: 'quantitative', title: 'hotspot index', scale: { zero: false, padding: 12 } };
  const y = { field: 'apc', type: 'quantitative', title: 'APC', axis: { format: '.0%' } };
  return {
    id,
    title,
    caption:
      'Each run’s cache hit rate against its hotspot index (the slowest worker’s TTFT p90 ÷ the median ' +
      'worker’s): up and left is better; affinity buys APC at the price of hot workers. Colour: the run; ' +
      `shape: its engine state.${best === undefined ? '' : ` The ringed point (★ in the legend) is the best run, ${best}: ${BEST_RUN_CRITERION}.`}`,
    spec: {
      ...base(rows),
      width: WIDTH,
      height: HEIGHT,
      layer: [
        {
          mark: { type: 'point', filled: true, size: 110, opacity: 0.9 },
          encoding: {
            x,
            y,
            color: {
              field: 'cell',
              type: 'nominal',
              title: 'run',
              scale: runScale(input),
              legend: bestLegendLabel(best),
            },
            shape: { field: 'state', type: 'nominal', title: 'engine state' },
            tooltip: [{ field: 'cell' }, { field: 'apc', format: '.1%' }, { field: 'hotspot', format: '.3~g' }],
          },
        },
        {
          transform: [{ filter: 'datum.best' }],
          mark: { type: 'point', filled: false, size: 420, strokeWidth: 2, color: '#111827' },
          encoding: { x, y },
        },
      ],
    },
  };
}

function perWorker(input: ReportInput): Figure {
  const id = 'per-worker-ttft';
  const title = 'Per-worker TTFT p90';
  const rows = input.cells.flatMap((cell) =>
    (cell.summary.per_instance ?? []).map((w) => ({
      cell: label(cell),
      worker: String(w.instance),
      ttft_p90_s: w.ttft_p90_s,
      requests: w.requests,
    })),
  );
  if (rows.length === 0)
    return { id, title, omitted: 'no run has per-instance data (per_instance in its summary, or its records)' };
  return {
    id,
    title,
    caption:
      'TTFT p90 of each worker (engine instance) per run: a tall bar is a hot worker; ' +
      'the hotspot index is the tallest over the median.',
    spec: {
      ...base(rows),
      width: WIDTH,
      height: HEIGHT,
      mark: 'bar',
      encoding: {
        x: { field: 'worker', type: 'ordinal', title: 'worker', axis: { labelAngle: 0 } },
        xOffset: { field: 'cell', type: 'nominal' },
        y: { field: 'ttft_p90_s', type: 'quantitative', title: 'TTFT p90 (s)' },
        color: {
          field: 'cell',
          type: 'nominal',
          title: 'run',
          scale: runScale(input),
          legend: bestLegendLabel(bestRunId(input.cells)),
        },
        tooltip: [
          { field: 'cell' },
          { field: 'worker' },
          { field: 'ttft_p90_s', format: '.3~g' },
          { field: 'requests' },
        ],
      },
    },
  };
}

function slowCauses(input: ReportInput): Figure {
  const id = 'slow-causes';
  const title = 'Slow-request causes';
  const rows = input.cells.flatMap((cell) =>
    Object.entries(cell.summary.slow?.causes ?? {}).map(([cause, n]) => ({ cell: label(cell), cause, n })),
  );
  if (rows.length === 0) return { id, title, omitted: 'no run summary has a slow-request breakdown (slow.causes)' };
  return {
    id,
    title,
    caption:
      'Slow requests per run, by the cause kvroute analyze run assigns: a prefill overlapping on the same ' +
      'worker, a queue on a hot worker, a cache miss with a large append, or unknown.',
    spec: {
      ...base(rows),
      width: WIDTH,
      height: { step: RUN_STEP },
      mark: 'bar',
      encoding: {
        y: runAxis(input),
        x: { field: 'n', type: 'quantitative', title: 'slow requests', stack: 'zero' },
        color: { field: 'cause', type: 'nominal', title: 'cause' },
        tooltip: [{ field: 'cell' }, { field: 'cause' }, { field: 'n' }],
      },
    },
  };
}

function kvFootprint(input: ReportInput): Figure {
  const id = 'kv-footprint';
  const title = 'KV footprint CDF';
  const cdf = input.traceSummary?.kv_footprint_cdf;
  if (cdf === undefined || cdf.length === 0)
    return { id, title, omitted: 'no trace characterization with a KV footprint CDF (trace_summary.kv_footprint_cdf)' };
  const rows = cdf.map(([fraction, bytes]) => ({ fraction, gib: bytes / 2 ** 30 }));
  const model = input.traceSummary?.model?.name ?? input.traceSummary?.model?.preset;
  return {
    id,
    title,
    caption:
      `The KV cache one request occupies (its input tokens × KV bytes per token${model === undefined ? '' : ` of ${model}`}), ` +
      'as a cumulative distribution over the trace’s requests.',
    spec: {
      ...base(rows),
      width: WIDTH,
      height: HEIGHT,
      mark: { type: 'line', interpolate: 'step-after' },
      encoding: {
        x: { field: 'gib', type: 'quantitative', title: 'KV per request (GiB)' },
        y: { field: 'fraction', type: 'quantitative', title: 'fraction of requests', axis: { format: '.0%' } },
      },
    },
  };
}

const REUSE_CLASSES = ['intra_session', 'cross_session', 'shared_prefix', 'unclassified'];

function reuse(input: ReportInput): Figure {
  const id = 'reuse';
  const title = 'Reuse decomposition';
  const rows: { source: string; class: string; rank: number; share: number }[] = [];
  const add = (source: string, parts: Record<string, number> | undefined): void => {
    for (const cls of REUSE_CLASSES)
      if (typeof parts?.[cls] === 'number')
        rows.push({ source, class: cls.replace('_', '-'), rank: REUSE_CLASSES.indexOf(cls), share: parts[cls] });
  };
  add('trace (theoretical)', input.traceSummary?.reuse);
  for (const cell of input.cells) add(label(cell), cell.summary.reuse);
  if (rows.length === 0)
    return { id, title, omitted: 'neither the trace characterization nor a run summary has reuse' };
  return {
    id,
    title,
    caption:
      'Where reused prefix blocks come from: the same session, another session, or a prefix shared by many ' +
      'sessions; for the trace (every reuse a perfect cache could get) and per run where measured.',
    spec: {
      ...base(rows),
      width: WIDTH,
      height: { step: 28 },
      mark: 'bar',
      encoding: {
        y: { field: 'source', type: 'nominal', title: null, sort: null },
        x: {
          field: 'share',
          type: 'quantitative',
          title: 'share of reuse',
          stack: 'normalize',
          axis: { format: '.0%' },
        },
        color: {
          field: 'class',
          type: 'nominal',
          title: null,
          scale: { domain: REUSE_CLASSES.map((c) => c.replace('_', '-')) },
        },
        order: { field: 'rank', type: 'quantitative' },
        tooltip: [{ field: 'source' }, { field: 'class' }, { field: 'share', format: '.1%' }],
      },
    },
  };
}

function interference(input: ReportInput): Figure {
  const id = 'interference';
  const title = 'Interference against prefill size';
  const rows = (input.interference ?? []).flatMap((p) =>
    (
      [
        ['TPOT index', p.tpot_index],
        ['TTFT index', p.ttft_index],
      ] as const
    )
      .filter(([, value]) => value !== null && value !== undefined)
      .map(([index, value]) => ({ index, variant: `${p.variant} worker`, prefill_tokens: p.prefill_tokens, value })),
  );
  if (rows.length === 0)
    return {
      id,
      title,
      omitted: 'no interference cells (interference in sweep.json, from kvroute sim interference --json)',
    };
  return {
    id,
    title,
    caption:
      'The engine model’s interference microbenchmark: TPOT (left) and TTFT (right) p90 of requests that overlap a ' +
      'prefill of the given size ÷ p90 of those that do not, with the prefill on the same worker and, as the ' +
      'control, on a different worker. Above 1: the prefill slowed them.',
    spec: {
      ...base(rows),
      facet: { column: { field: 'index', type: 'nominal', title: null } },
      spec: {
        width: 300,
        height: HEIGHT,
        mark: { type: 'line', point: true },
        encoding: {
          x: {
            field: 'prefill_tokens',
            type: 'quantitative',
            title: 'prefill tokens',
            scale: { type: 'log', base: 2 },
          },
          y: { field: 'value', type: 'quantitative', title: 'interference index' },
          color: { field: 'variant', type: 'nominal', title: null },
          tooltip: [{ field: 'variant' }, { field: 'prefill_tokens' }, { field: 'value', format: '.3~g' }],
        },
      },
      resolve: { scale: { y: 'independent' } },
    },
  };
}

/** Each policy's label followed by its ES verdict (es-ablation.ts), where the sweep has one. */
function verdictLabels(input: ReportInput): Record<string, unknown> {
  const verdicts = input.esPairs.filter((p) => p.comparison.verdict !== null);
  if (verdicts.length === 0) return {};
  const expr = verdicts.reduceRight(
    (rest, p) =>
      `datum.value === ${JSON.stringify(p.policy)} ? ${JSON.stringify(`: ${p.comparison.verdict!}`)} : ${rest}`,
    "''",
  );
  return { labelExpr: `datum.label + (${expr})` };
}

/** TTFT p90 per policy under each engine state, for the policies the sweep ran under two or more. */
function engineState(input: ReportInput): Figure {
  const id = 'engine-state';
  const title = 'Engine-state ablation';
  const states = new Map<string, Set<string>>();
  for (const cell of input.cells) {
    if (cell.engine_state === undefined) continue;
    if (!states.has(cell.policy)) states.set(cell.policy, new Set());
    states.get(cell.policy)!.add(cell.engine_state);
  }
  const rows = input.cells
    .filter((cell) => cell.engine_state !== undefined && states.get(cell.policy)!.size > 1)
    .map((cell) => ({ policy: cell.policy, state: cell.engine_state, ttft_p90_s: cell.summary.ttft_s.p90 }));
  if (rows.length === 0)
    return { id, title, omitted: 'no policy ran under more than one engine state (shadow counters, shm)' };
  return {
    id,
    title,
    caption:
      'TTFT p90 of each policy when the router sees only its own shadow counters and when it also reads the ' +
      'engines’ real state: where real-time state helps a policy and where it hurts' +
      (input.esPairs.length > 0 ? ' (each label’s verdict: the ES ablation table’s).' : '.'),
    spec: {
      ...base(rows),
      width: WIDTH,
      height: { step: RUN_STEP * 1.5, for: 'position' },
      mark: 'bar',
      encoding: {
        y: { field: 'policy', type: 'nominal', title: null, sort: null, axis: verdictLabels(input) },
        yOffset: { field: 'state', type: 'nominal' },
        x: { field: 'ttft_p90_s', type: 'quantitative', title: 'TTFT p90 (s)' },
        color: { field: 'state', type: 'nominal', title: 'engine state' },
        tooltip: [{ field: 'policy' }, { field: 'state' }, { field: 'ttft_p90_s', format: '.3~g' }],
      },
    },
  };
}

/** Every figure of the report, drawn or omitted, in order. */
export function reportFigures(input: ReportInput): Figure[] {
  return [
    latency(input),
    apcCeiling(input),
    apcHotspot(input),
    perWorker(input),
    slowCauses(input),
    kvFootprint(input),
    reuse(input),
    interference(input),
    engineState(input),
  ];
}
