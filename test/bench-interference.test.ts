/**
 * `kvroute bench interference`: the B2 protocol against live endpoints, here two simulated
 * engines at 5× real time. The decode load's TPOT suffers when cold prefills land on its own
 * engine and not when they land on the other; bad command lines and a down endpoint are refused.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { coldPrompt } from '../src/live/cold-prompt.js';
import { liveInterferenceCell } from '../src/live/interference-live.js';
import { checkTarget } from '../src/replay/target-check.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const kvroute = (args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000 });

const SPEED = 5;
const schedule = { durationS: 30, injections: 2, injectionEveryS: 6 };

describe('cold prompts', () => {
  it('are the asked length in 4-byte words and share no first block', () => {
    const prompts = Array.from({ length: 200 }, () => coldPrompt(300));
    for (const p of prompts) {
      expect(Buffer.byteLength(p)).toBe(12 + 4 * 300);
      expect(p.slice(12)).toMatch(/^( [a-z]{3}){300}$/);
    }
    expect(new Set(prompts.map((p) => p.slice(0, 12))).size).toBe(200);
  });
});

describe('bench interference against live endpoints', () => {
  let fleet: SimFleet;
  beforeAll(async () => {
    fleet = await startSimFleet({ instances: 2, port: 0, speed: SPEED });
  });
  afterAll(() => fleet.close());

  it('finds decode TPOT hurt by prefills on its own engine, and not by prefills on the other', async () => {
    const model = await checkTarget(fleet.urls[0]!, undefined);
    const options = { decodeEndpoint: fleet.urls[0]!, prefillEndpoint: fleet.urls[1]!, model, schedule, speed: SPEED };
    const different = await liveInterferenceCell('different', 16384, options);
    const same = await liveInterferenceCell('same', 16384, options);
    for (const cell of [different, same]) {
      expect(cell.n_overlap).toBeGreaterThan(0);
      expect(cell.n_clean).toBeGreaterThan(50);
      expect(cell.n_overlap + cell.n_clean).toBe(schedule.durationS * 4);
    }
    expect(different.tpot_index).toBeGreaterThan(0.7);
    expect(different.tpot_index).toBeLessThan(1.4);
    expect(same.tpot_index).toBeGreaterThan(2);
  }, 60_000);
});

describe('kvroute bench interference refuses', () => {
  it.each([
    [[], /needs --decode-endpoint URL and --prefill-endpoint URL, or --sim/],
    [['--sim', '--decode-endpoint', 'http://127.0.0.1:1'], /--sim starts its own engines/],
    [
      ['--decode-endpoint', 'ftp://x', '--prefill-endpoint', 'http://127.0.0.1:1'],
      /--decode-endpoint must be an http\(s\) URL/,
    ],
    [['--sim', '--variants', 'sideways'], /--variants: "sideways" is not one of different, same/],
    [['--sim', '--prefill-sizes', '8k'], /--prefill-sizes: "8k"/],
    [
      ['--decode-endpoint', 'http://127.0.0.1:9', '--prefill-endpoint', 'http://127.0.0.1:9', '--speed', '2'],
      /--speed applies to --sim only/,
    ],
    [
      ['--decode-endpoint', 'http://127.0.0.1:9', '--prefill-endpoint', 'http://127.0.0.1:9'],
      /the target http:\/\/127\.0\.0\.1:9 is not reachable .*is it running\?/,
    ],
  ])('%j with exit 2 and a message naming the problem', (args, message) => {
    const out = kvroute(['bench', 'interference', ...args]);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(message);
    expect(out.stdout).toBe('');
  });
});
