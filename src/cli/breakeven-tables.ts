/**
 * The human form of `kvroute sim breakeven`: a heading line naming the engine model and link,
 * the break-even table at the given decode batch, the comparison with the reference experiments (D = 1, the
 * selected transfer mode, warm), and where offload starts paying. Markdown tables, so the output
 * pastes into docs/offload.md as is; every column names its unit.
 */
import type { BreakEvenRow, BreakEvenTable, PaysFrom } from '../sim/breakeven.js';

const ms = (value: number): string => value.toFixed(1);
/** "+1.2", "−0.3", "±0.0": the sign of the value as printed. */
function signed(value: number, digits: number): string {
  const text = Math.abs(value).toFixed(digits);
  return `${Number(text) === 0 ? '±' : value > 0 ? '+' : '−'}${text}`;
}
const tokens = (value: number): string => value.toLocaleString('en-US');
const tokenCount = (value: number): string => `${tokens(value)} ${value === 1 ? 'token' : 'tokens'}`;

function table(header: readonly string[], rows: readonly string[][]): string {
  const row = (cells: readonly string[]): string => `| ${cells.join(' | ')} |`;
  return [row(header), row(header.map(() => '---')), ...rows.map(row)].join('\n');
}

/** "39.6 (28 %)": a saving in ms and in % of the interference. */
function saving(value: number, row: BreakEvenRow): string {
  return `${signed(value, 1)} (${signed((value / row.interference_ms) * 100, 0)} %)`;
}

function paysText(pays: PaysFrom, max: number): string {
  if (pays.first === null) return `never, up to ${tokenCount(max)}`;
  if (pays.always === pays.first) return `from ${tokenCount(pays.first)} on`;
  if (pays.always === null) return `first at ${tokenCount(pays.first)}, but not at ${tokenCount(max)}`;
  return `first at ${tokenCount(pays.first)}, for every prompt from ${tokenCount(pays.always)} on`;
}

export function renderBreakEven(t: BreakEvenTable): string {
  const mode = t.link.layerwise ? `layer-wise (${t.link.layers} layers)` : 'bulk';
  const d = t.decode_batch;
  const head =
    `Prefill offload break-even · ${t.preset} · decode batch ${d} · link ${t.link.linkGbps} Gbps, ${mode}, ` +
    `warm overhead ${t.link.warmOverheadMs} ms, cold penalty ${t.link.coldPenaltyMs} ms · ${tokens(t.link.kvBytesPerToken)} KV bytes per token`;
  const main = table(
    [
      'prompt (tokens)',
      'prefill (ms)',
      `interference ×${d} (ms)`,
      'transfer warm (ms)',
      'transfer cold (ms)',
      'transfer layer-wise, warm (ms)',
      'net saving warm (ms, % of interference)',
      'net saving cold (ms, %)',
    ],
    t.rows.map((r) => [
      tokens(r.prompt_tokens),
      ms(r.prefill_ms),
      ms(r.interference_ms),
      ms(r.transfer.warm_ms),
      ms(r.transfer.cold_ms),
      ms(r.transfer.layerwise_warm_ms),
      saving(r.net_saving_warm_ms, r),
      saving(r.net_saving_cold_ms, r),
    ]),
  );
  const seeded = t.rows.filter((r) => r.seeds !== null);
  const seeds = table(
    [
      'prompt (tokens)',
      'interference model / seeds (ms)',
      'diff (%)',
      'transfer warm model / seeds (ms)',
      'diff (%)',
      'seeds’ transfer figure',
      'net saving model / seeds (ms)',
      'diff (%)',
    ],
    seeded.map((r) => {
      const s = r.seeds!;
      return [
        tokens(r.prompt_tokens),
        `${ms(r.prefill_ms)} / ${s.interference_ms}`,
        signed(s.interference_diff_pct, 1),
        `${ms(r.transfer.warm_ms)} / ${s.transfer_ms}`,
        signed(s.transfer_diff_pct, 1),
        s.transfer_basis,
        `${ms(r.prefill_ms - r.transfer.warm_ms)} / ${s.net_saving_ms}`,
        signed(s.net_saving_diff_pct, 1),
      ];
    }),
  );
  return [
    head,
    '',
    main,
    '',
    `Against the reference experiments' Combined Break-Even Analysis (B2, docs/glossary.md; D = 1, ${mode}, warm):`,
    '',
    seeds,
    '',
    `Offload pays (interference ×${d} > transfer), searched over every prompt of 1 to ${tokens(t.max_prompt_tokens)} tokens:`,
    `  warm connection: ${paysText(t.pays_from.warm, t.max_prompt_tokens)}`,
    `  cold connection: ${paysText(t.pays_from.cold, t.max_prompt_tokens)}`,
  ].join('\n');
}
