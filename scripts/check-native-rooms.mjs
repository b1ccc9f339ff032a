#!/usr/bin/env node
// The native half of docs/architecture.md's layering, checked by `npm run check:architecture`:
// each folder under native/ may include only the rooms listed for it, and nothing outside
// native/bindings/ includes napi.h, so the algorithm rooms compile into plain C++ tests and
// benchmarks. Prints every violation as `file:line: reason` and exits 1 if there is any.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

// The folder to check: native/ of this checkout, or the argument (the tests check a made-up tree).
const root = process.argv[2] ?? fileURLToPath(new URL('../native/', import.meta.url));

/** room -> the other rooms it may include (a table in docs/architecture.md says the same) */
/** @type {Record<string, string[]>} */
const allowed = {
  util: [],
  hash: ['util'],
  feed: ['util'],
  trie: ['util', 'hash'],
  scan: ['util', 'hash'],
  core: ['util', 'hash', 'feed'],
  otlp: [],
  bindings: ['util', 'hash', 'feed', 'trie', 'scan', 'core', 'otlp'],
  test: ['util', 'hash', 'feed', 'trie', 'scan', 'core', 'otlp'],
  bench: ['util', 'hash', 'feed', 'trie', 'scan', 'core', 'otlp'],
  fuzz: ['util', 'hash', 'feed', 'trie', 'scan', 'core', 'otlp'],
};

/** @param {string} dir @returns {Generator<string>} */
function* sourceFiles(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(path);
    else if (/\.(h|cc)$/.test(entry.name)) yield path;
  }
}

const problems = [];
for (const file of sourceFiles(root)) {
  const rel = relative(root, file);
  const room = rel.split('/')[0] ?? '';
  if (!(room in allowed)) {
    problems.push(`native/${rel}: not in a room (native/<room>/…; rooms: ${Object.keys(allowed).join(', ')})`);
    continue;
  }
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      const where = `native/${rel}:${i + 1}`;
      if (/^\s*#\s*include\s*[<"]napi\.h[>"]/.test(line) && room !== 'bindings')
        problems.push(`${where}: napi.h outside native/bindings/ (algorithm rooms compile without Node)`);
      const local = /^\s*#\s*include\s*"([^"]+)"/.exec(line);
      if (!local) return;
      const header = local[1] ?? '';
      if (!header.includes('/')) return; // a vendored header found on the include path (simdjson.h)
      const target = header.split('/')[0] ?? '';
      const may = allowed[room] ?? [];
      if (target !== room && !may.includes(target))
        problems.push(`${where}: ${room}/ may not include ${header} (allowed: ${may.join(', ') || 'none'})`);
    });
}

if (problems.length > 0) {
  console.error(problems.join('\n'));
  console.error(`${problems.length} native layering violation(s); the rules are in docs/architecture.md`);
  process.exit(1);
}
console.log('native rooms: every include within the layering of docs/architecture.md');
