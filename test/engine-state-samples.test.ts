/** The replay's engine-state log as analyze run reads it. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { readEngineStates } from '../src/analysis/engine-state-samples.js';

const dir = mkdtempSync(join(tmpdir(), 'kvroute-engine-state-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe('readEngineStates', () => {
  it('keeps samples, skips error lines and a last line cut off', () => {
    const states = readEngineStates(
      file(
        'ok.engine-state',
        [
          '{"t":1,"engine":0,"url":"http://a","running":3,"waiting":2,"kv_usage":0.4}',
          '{"t":1,"engine":1,"url":"http://b","error":"GET /metrics failed: ECONNREFUSED"}',
          '{"t":2,"engine":0,"url":"http://a","running":3,"waiting":5,"kv_usage":0.5}',
          '{"t":3,"engine":1,"url":"http://b","runn',
        ].join('\n'),
      ),
    );
    expect(states.waitingAt(0, 1.5)).toBe(2);
    expect(states.waitingAt(0, 2)).toBe(5);
    expect(states.waitingAt(0, 4.5)).toBeUndefined(); // 2.5 s old
    expect(states.waitingAt(1, 3)).toBeUndefined();
    expect(states.meanWaitingAt(2)).toBe(5);
  });

  it('refuses a line that is not a sample, naming the file and line', () => {
    const bad = file('bad.engine-state', '{"t":1,"engine":0,"waiting":1}\nnot json\n{"t":2,"engine":0,"waiting":1}\n');
    expect(() => readEngineStates(bad)).toThrow(`${bad}:line 2: not JSON; is it an engine-state log?`);
    const noWaiting = file('nowait.engine-state', '{"t":1,"engine":0,"running":1}\n');
    expect(() => readEngineStates(noWaiting)).toThrow(`${noWaiting}:line 1: waiting must be a number`);
  });
});
