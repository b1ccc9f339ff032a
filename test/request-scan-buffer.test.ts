/**
 * scanAsync reads the caller's bytes on the libuv threadpool. Holding a reference to the typed
 * array keeps it from being collected but not its memory from moving: a transfer (here
 * structuredClone with `transfer`, as postMessage does) detaches the buffer and hands its memory
 * to a new ArrayBuffer, which the collector may then free; and JavaScript may write the bytes
 * while the scan reads them. The scanner copies the body before it queues the scan
 * (native/bindings/js-request-scan.cc), so neither reaches the scan: each case must give the same
 * result as a synchronous scan of an untouched copy, in a child process that must survive it.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

import { nativeDisabledByEnv } from '../src/core/native.js';

const scanner = new URL('../dist/core/request-scanner.js', import.meta.url).href;

// The child: a 16 MiB chat body (long enough that its scan is still running when the main thread
// detaches or overwrites it), scanned async while the main thread interferes.
const script = `
  import { scanBody, scanBodyAsync } from ${JSON.stringify(scanner)};
  const content = 'abcdefgh'.repeat(2 * 1024 * 1024); // 16 MiB: every block's key differs (keys chain)
  const body = () => new TextEncoder().encode(JSON.stringify({ model: 'm', messages: [{ role: 'user', content }] }));
  const expected = scanBody('chat', body(), 128, false);
  const same = (r) =>
    r.kind === 'ok' && expected.kind === 'ok' && r.ids.hashIds.length === expected.ids.hashIds.length &&
    r.ids.hashIds.every((id, k) => id === expected.ids.hashIds[k]) ? 'same' : 'different';
  const outcome = {};

  let bytes = body();
  let pending = scanBodyAsync('chat', bytes, 128, false);
  // Detach: the memory moves to the clone, which is dropped and collected while the scan runs.
  structuredClone(bytes.buffer, { transfer: [bytes.buffer] });
  globalThis.gc();
  const reuse = new Uint8Array(bytes.byteLength + 64).fill(0x5d); // likely lands where the freed bytes were
  outcome.detached = same(await pending);
  outcome.detachedLength = bytes.byteLength;

  bytes = body();
  pending = scanBodyAsync('chat', bytes, 128, false);
  bytes.fill(0x5d); // overwrite while the scan runs
  outcome.overwritten = same(await pending);
  console.log(JSON.stringify({ ...outcome, reused: reuse[0] }));`;

describe.skipIf(nativeDisabledByEnv())("scanAsync and the caller's buffer", () => {
  it('scans what the caller passed, though the buffer is detached and freed, or overwritten, meanwhile', () => {
    const child = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(child.stderr).toBe('');
    expect(child.signal).toBeNull();
    expect(child.status).toBe(0);
    expect(JSON.parse(child.stdout)).toEqual({
      detached: 'same',
      detachedLength: 0,
      overwritten: 'same',
      reused: 0x5d,
    });
  });
});
