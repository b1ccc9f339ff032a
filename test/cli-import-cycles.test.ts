/**
 * The command line has no import cycles: a verb's defaults live in src/cli/defaults/, so a
 * `*-command.ts` (which lazily imports its verb) and its `*-verb.ts` never import each other.
 * A small scan of relative imports (static, re-exports and dynamic `import()`; `import type` is
 * erased and does not count), not a full module resolver.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

import { describe, expect, it } from 'vitest';

const CLI = resolve(import.meta.dirname, '../src/cli');

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

function importGraph(files: string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  const pattern = /(?:(?:import|export)\s[^'"]*?from\s+|import\()['"](\.[^'"]+)['"]/g;
  for (const file of files) {
    const deps: string[] = [];
    for (const m of readFileSync(file, 'utf8').matchAll(pattern)) {
      if (/^import\s+type\b/.test(m[0])) continue;
      const target = resolve(dirname(file), m[1]!).replace(/\.js$/, '.ts');
      if (known.has(target)) deps.push(target);
    }
    graph.set(file, deps);
  }
  return graph;
}

function cycles(graph: Map<string, string[]>): string[] {
  const found: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (node: string): void => {
    state.set(node, 'open');
    stack.push(node);
    for (const dep of graph.get(node) ?? []) {
      if (state.get(dep) === 'open') {
        found.push([...stack.slice(stack.indexOf(dep)), dep].map((f) => relative(CLI, f)).join(' -> '));
      } else if (!state.has(dep)) visit(dep);
    }
    stack.pop();
    state.set(node, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return found;
}

describe('src/cli imports', () => {
  it('have no cycles', () => {
    expect(cycles(importGraph(tsFiles(CLI)))).toEqual([]);
  });
});
