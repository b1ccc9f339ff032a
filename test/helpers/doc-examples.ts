/**
 * The docs' runnable examples: a shell block a reader pastes, preceded by a marker
 *
 *   <!-- doc-example NAME ports=8000,8100-8103 expect="REGEX" -->
 *   ```bash
 *   kvroute sim serve … &
 *   kvroute serve … &
 *   curl --retry 10 --retry-connrefused …
 *   ```
 *
 * runs here as pasted, with three substitutions a reader's machine does not need: `kvroute` is
 * this checkout's dist/cli.js; every port the marker lists moves to a free range of this host (a
 * range keeps its consecutive order: `sim serve --port P` takes P..P+N-1); and the servers the block
 * starts in the background are stopped afterwards (the block runs in its own process group,
 * which is killed whole). The block passes when it exits 0 and its output matches `expect`.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..', '..');

export interface DocExample {
  doc: string;
  name: string;
  /** The ports the block names, in ranges [first, last]. */
  ranges: Array<[number, number]>;
  expect: RegExp;
  script: string;
}

const MARKER = /<!-- doc-example (\S+)((?: \w+=(?:"[^"]*"|\S+))*) -->\n\n?```(?:bash|sh)\n([\s\S]*?)^```$/gm;

/** Every marked example of a doc (a path under the checkout). */
export function docExamples(doc: string): DocExample[] {
  const text = readFileSync(join(ROOT, doc), 'utf8');
  return [...text.matchAll(MARKER)].map((m) => {
    const attrs = Object.fromEntries(
      [...m[2]!.matchAll(/(\w+)=(?:"([^"]*)"|(\S+))/g)].map((a) => [a[1]!, a[2] ?? a[3]!]),
    );
    const ranges = (attrs.ports ?? '')
      .split(',')
      .filter((r) => r !== '')
      .map((r) => {
        const [first, last] = r.split('-').map(Number);
        return [first!, last ?? first!] as [number, number];
      });
    return { doc, name: m[1]!, ranges, expect: new RegExp(attrs.expect ?? '[\\s\\S]'), script: m[3]! };
  });
}

/** A port p such that p..p+count-1 were free a moment ago (bound and released). */
async function freeRange(count: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 40_000);
    if ((await Promise.all(Array.from({ length: count }, (_, i) => portFree(base + i)))).every(Boolean)) return base;
  }
  throw new Error(`no ${count} consecutive free ports found`);
}

function portFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.once('error', () => done(false));
    server.listen(port, '127.0.0.1', () => server.close(() => done(true)));
  });
}

/** The block with its ports moved (longest numbers first, whole numbers only). */
async function withFreePorts(example: DocExample): Promise<string> {
  const moves = new Map<number, number>();
  for (const [first, last] of example.ranges) {
    const base = await freeRange(last - first + 1);
    for (let p = first; p <= last; p++) moves.set(p, base + p - first);
  }
  return example.script.replace(/\b\d{2,5}\b/g, (n) => String(moves.get(Number(n)) ?? n));
}

/** Runs an example; resolves with its exit code and output once it and its servers are stopped. */
export async function runDocExample(
  example: DocExample,
  timeoutMs: number,
): Promise<{ code: number | null; output: string }> {
  const bin = mkdtempSync(join(tmpdir(), 'kvroute-doc-example-'));
  const shim = join(bin, 'kvroute');
  writeFileSync(shim, `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, 'dist/cli.js')}" "$@"\n`);
  chmodSync(shim, 0o755);
  const script = await withFreePorts(example);
  const child = spawn('bash', ['-e', '-c', script], {
    cwd: ROOT,
    detached: true,
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const timer = setTimeout(() => void stopGroup(child.pid!), timeoutMs);
  const code = await new Promise<number | null>((done) => child.once('exit', done));
  clearTimeout(timer);
  await stopGroup(child.pid!);
  rmSync(bin, { recursive: true, force: true });
  return { code, output };
}

/**
 * Ends every process of the block's group (the shell and the servers it left in the background):
 * SIGTERM, then SIGKILL for what still runs after 10 s; resolves once the group is gone.
 */
async function stopGroup(pid: number): Promise<void> {
  const signal = (name: NodeJS.Signals | 0): boolean => {
    try {
      process.kill(-pid, name);
      return true;
    } catch {
      return false; // the group is gone
    }
  };
  if (!signal('SIGTERM')) return;
  for (let waited = 0; waited < 10_000; waited += 100) {
    await new Promise((r) => setTimeout(r, 100));
    if (!signal(0)) return;
  }
  signal('SIGKILL');
}
