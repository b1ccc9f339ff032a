#!/usr/bin/env node
// Files under src/ and native/ stay under ~500 lines (docs/architecture.md, "Size"). A longer
// file says why in its header: a line within its first 40 that starts a comment with
// "Long file:" and gives the reason. Prints each file that is over the limit without one and
// exits 1 if there is any.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const LIMIT = 520; // "~500": a little slack before a file must explain itself
// The tree to check: this checkout, or the argument (the tests check a made-up tree).
const root = process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url));
const rooms = ['src', 'native'];

/** @param {string} dir @returns {Generator<string>} */
function* sourceFiles(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(path);
    else if (/\.(ts|mjs|h|cc)$/.test(entry.name)) yield path;
  }
}

const unexplained = [];
for (const room of rooms.filter((r) => existsSync(join(root, r)))) {
  for (const file of sourceFiles(join(root, room))) {
    const lines = readFileSync(file, 'utf8').split('\n');
    if (lines.length <= LIMIT) continue;
    const explained = lines.slice(0, 40).some((line) => /^\s*(\*|\/\/|\/\*)\s*Long file:\s*\S/.test(line));
    if (!explained)
      unexplained.push(`${relative(root, file)}: ${lines.length} lines, no "Long file: <why>" in its header`);
  }
}

if (unexplained.length > 0) {
  console.error(unexplained.join('\n'));
  console.error(`${unexplained.length} file(s) over ${LIMIT} lines without a reason (docs/architecture.md, "Size")`);
  process.exit(1);
}
console.log(`file sizes: every file under ${rooms.join('/, ')}/ is within ${LIMIT} lines or says why`);
