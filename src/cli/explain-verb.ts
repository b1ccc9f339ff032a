/**
 * `kvroute explain`: builds the scenario's fleet (explain-scenario.ts) and explains its request
 * as a dry run: the instance, the base policy's reason, the `x-kvroute-reason` text
 * (src/core/offload-reason.ts), the offload section with both costs and the threshold, and
 * every candidate's matched blocks, terms and score. --json prints the explanation object.
 */
import { offloadReason } from '../core/offload-reason.js';
import type { Explanation, OffloadExplanation } from '../core/types.js';
import { policyFlag, readInput, type OptionValues } from './common.js';
import { buildFleet, readScenario, routeRequest } from './explain-scenario.js';

const ms = (x: number): string => `${x.toFixed(2)} ms`;

function offloadLines(o: OffloadExplanation, instance: string | null): string[] {
  const lines = [`offload:    ${o.outcome} (threshold ${o.thresholdTokens} uncached tokens)`];
  if (o.outcome === 'not_decoding' || o.outcome === 'below_threshold') return lines;
  if (o.prefillInstance !== null) lines.push(`  prefill on ${o.prefillInstance}, decode on ${instance}`);
  lines.push(`  interference ${ms(o.interferenceMs)} (decode time the prefill costs ${instance}'s decodes)`);
  const pair = o.outcome === 'no_prefill_instance' ? 'priced warm' : o.coldPair ? 'cold pair' : 'warm pair';
  lines.push(`  transfer     ${ms(o.transferMs)} (${pair})`);
  if (o.extraPrefillMs !== 0)
    lines.push(
      `  extra        ${ms(o.extraPrefillMs)} (chargePrefill: the request's prefill on ${o.prefillInstance ?? 'P'} minus on ${instance})`,
    );
  return lines;
}

function candidateLines(e: Explanation): string[] {
  const header = ['instance', 'matched', 'uncached', 'requests', 'pending', 'kv', 'score'];
  const rows = e.candidates.map((c) => [
    `${c.instance === e.instance ? '*' : ' '}${c.instance}${c.drained ? ' (drained)' : ''}`,
    String(c.matchedBlocks),
    c.terms === null ? '-' : String(c.terms.uncachedTokens),
    c.terms === null ? '-' : String(c.terms.requests),
    c.terms === null ? '-' : String(c.terms.pendingPrefillTokens),
    c.terms === null ? '-' : c.terms.kvUsage.toFixed(3),
    c.score === null ? '-' : Number(c.score.toPrecision(6)).toString(),
  ]);
  const widths = header.map((h, k) => Math.max(h.length + (k === 0 ? 1 : 0), ...rows.map((r) => r[k]!.length)));
  const line = (cells: string[]) =>
    cells.map((cell, k) => (k === 0 ? cell.padEnd(widths[k]!) : cell.padStart(widths[k]!))).join('  ');
  return ['candidates:', `  ${line([` ${header[0]}`, ...header.slice(1)])}`, ...rows.map((r) => `  ${line(r)}`)];
}

export function explainVerb(values: OptionValues, [file]: string[]): void {
  const scenario = readScenario(
    readInput(file, {
      verb: 'explain',
      what: 'a JSON scenario',
      example: 'kvroute explain examples/offload-scenario.json',
    }),
    policyFlag(values),
  );
  const { router, conversations } = buildFleet(scenario);
  const explanation = router.explain(routeRequest(scenario.request, scenario.blockSize, conversations));
  const header = `${explanation.reason ?? 'no instance'}${offloadReason(router.decision.offload)}`;
  if (values.json === true) {
    process.stdout.write(`${JSON.stringify({ ...explanation, header }, null, 2)}\n`);
    return;
  }
  const r = scenario.request;
  const lines = [
    `policy:     ${explanation.policy}`,
    `request:    ${r.inputTokens} tokens of ${r.conversation}${r.model === undefined ? '' : `, model ${r.model}`}${r.session === undefined ? '' : `, session ${r.session}`}`,
    `instance:   ${explanation.instance ?? 'none (no candidate)'}`,
    `reason:     ${header}`,
    ...(explanation.offload === null ? [] : offloadLines(explanation.offload, explanation.instance)),
    ...candidateLines(explanation),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}
