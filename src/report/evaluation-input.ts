/**
 * A policy evaluation directory (scripts/policy-eval.mjs, docs/policy-evaluation.md): one or
 * more `<set>-seeds-<seeds>[-fleet-<spec>].json` files, each every policy's TTFT p90, APC and hotspot index by
 * regime and seed. `kvroute report DIR` renders them when DIR holds no sweep.json.
 *
 * Every field is checked, naming the file and the field: a report never shows a number it
 * could not read. Issue #28's `targets` and `setups` are optional (evaluation-targets.ts).
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

import { readSetups, readTargets, type RegimeSetup, type TargetRecord } from './evaluation-targets.js';
import { Fields, readJson, ReportError } from './report-input.js';

/** The file names an evaluation directory is recognised by. */
export const EVALUATION_FILE = /^([a-z]+)-seeds-([0-9-]+?)(-fleet-[A-Za-z0-9.-]+)?\.json$/;

/** One policy in one regime: means over the regime's runs (seeds). */
export interface EvaluationRow {
  policy: string;
  ttftP90: number;
  apc: number;
  hotspot: number;
  runs: number;
}

export interface EvaluationRegime {
  name: string;
  /** In the file's policy order. */
  rows: EvaluationRow[];
}

export interface EvaluationSet {
  file: string;
  /** `regimes`, `perturbations`, … (the file name's first part). */
  set: string;
  seeds: number[];
  /** The mixed fleet every regime ran on (`policy-eval.mjs --fleet`), when one did. */
  fleet?: string;
  policies: string[];
  regimes: EvaluationRegime[];
  /** Issue #28's targets by regime, when the file records them. */
  targets?: Map<string, TargetRecord>;
  /** How each regime's trace and sweep were made, by regime and seed, when the file records it. */
  setups?: Map<string, Map<string, RegimeSetup>>;
}

/** The evaluation files of `dir`, by name; empty when it has none. */
export function evaluationFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => EVALUATION_FILE.test(name))
    .sort();
}

const mean = (xs: number[]): number => xs.reduce((a, x) => a + x, 0) / xs.length;

function loadSet(dir: string, name: string): EvaluationSet {
  const path = join(dir, name);
  const f = new Fields(path);
  const top = f.object(readJson(path), '(top level)');
  const seeds = f.array(top.seeds, 'seeds').map((s, i) => f.number(s, `seeds[${i}]`));
  const policies = f.array(top.policies, 'policies').map((p, i) => f.string(p, `policies[${i}]`));
  if (policies.length === 0) f.fail('policies', 'a non-empty array', top.policies);
  const cells = f.object(top.cells, 'cells');
  const regimes: EvaluationRegime[] = Object.entries(cells).map(([regime, byPolicy]) => {
    const perPolicy = f.object(byPolicy, `cells.${regime}`);
    const rows = policies.map((policy) => {
      const field = `cells.${regime}.${policy}`;
      const runs = f.array(perPolicy[policy], field);
      if (runs.length === 0) f.fail(field, 'a non-empty array of runs', runs);
      const read = (key: string) =>
        runs.map((run, i) => f.number(f.object(run, `${field}[${i}]`)[key], `${field}[${i}].${key}`));
      return {
        policy,
        ttftP90: mean(read('ttft_p90')),
        apc: mean(read('apc')),
        hotspot: mean(read('hotspot')),
        runs: runs.length,
      };
    });
    return { name: regime, rows };
  });
  if (regimes.length === 0) f.fail('cells', 'at least one regime', top.cells);
  const fleet = top.fleet === undefined ? {} : { fleet: f.string(top.fleet, 'fleet') };
  const targets = readTargets(f, top.targets);
  const setups = readSetups(f, top.setups);
  return {
    file: name,
    set: EVALUATION_FILE.exec(name)![1]!,
    seeds,
    ...fleet,
    policies,
    regimes,
    ...(targets === undefined ? {} : { targets }),
    ...(setups === undefined ? {} : { setups }),
  };
}

/** Every evaluation file of `dir`; a ReportError when there is none or one is malformed. */
export function loadEvaluation(dir: string): EvaluationSet[] {
  const files = evaluationFiles(dir);
  if (files.length === 0) throw new ReportError(`${dir}: holds no <set>-seeds-<seeds>.json evaluation file`);
  return files.map((name) => loadSet(dir, name));
}
