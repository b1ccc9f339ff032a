/**
 * x-kvroute-predicted-cached-tokens: the proxy's prediction of the engine's cached tokens, beside
 * x-kvroute-reason, checked against what simulated engines (kvroute sim serve) report in
 * `usage.prompt_tokens_details.cached_tokens`, on both HTTP servers, streaming and not.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { SimFleet } from '../src/sim/sim-fleet.js';
import { MODEL, post, startFleetProxy, type ProxyRig } from './helpers/proxy-harness.js';

const BLOCK = 16;
const HEADER = 'x-kvroute-predicted-cached-tokens';

interface Answer {
  instance: string | null;
  predicted: string | null;
  cached: number;
}

/** One completion over `blocks` full blocks of kvroute's hash_ids, read to its usage. */
async function complete(rig: ProxyRig, session: string, ids: number[], stream: boolean): Promise<Answer> {
  const response = await post(
    rig.base,
    '/v1/completions',
    {
      model: MODEL,
      prompt: `session ${session}`,
      hash_ids: ids,
      input_tokens: ids.length * BLOCK,
      max_tokens: 2,
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
    },
    { 'x-session-id': session },
  );
  expect(response.status).toBe(200);
  const text = await response.text();
  const body = stream
    ? JSON.parse(
        text
          .split('\n\n')
          .filter((e) => e !== '')
          .at(-2)!
          .slice(6),
      )
    : JSON.parse(text);
  return {
    instance: response.headers.get('x-kvroute-instance'),
    predicted: response.headers.get(HEADER),
    cached: body.usage.prompt_tokens_details.cached_tokens,
  };
}

const ids = (session: number, count: number): number[] => Array.from({ length: count }, (_, i) => session * 1000 + i);

describe.each(['uws', 'node'] as const)('x-kvroute-predicted-cached-tokens (--http %s)', (http) => {
  let rig: ProxyRig & { fleet: SimFleet };
  beforeAll(async () => {
    rig = await startFleetProxy(2, { policy: 'unified+A+B', http, blockSize: BLOCK }, 200);
  });
  afterAll(() => rig?.close());

  it.each([false, true])('equals the engine’s cached tokens as a session grows (stream %s)', async (stream) => {
    const session = stream ? 2 : 1;
    const name = `${http}-${session}`;
    const first = await complete(rig, name, ids(session, 8), stream);
    expect(first.predicted).toBe('0');
    expect(first.cached).toBe(0);
    const second = await complete(rig, name, ids(session, 16), stream);
    expect(second.instance).toBe(first.instance);
    expect(second.predicted).toBe(String(8 * BLOCK));
    expect(second.cached).toBe(8 * BLOCK);
    const third = await complete(rig, name, ids(session, 24), stream);
    expect(third.predicted).toBe(String(16 * BLOCK));
    expect(third.cached).toBe(16 * BLOCK);
    // The same prompt again: every block matches. The engine recomputes the last token, so it
    // serves 23 blocks; the proxy is not given hash_ids requests' token counts, so its cap is
    // the matched blocks (Decision.predictedCachedTokens): one block over.
    const again = await complete(rig, name, ids(session, 24), stream);
    expect(again.cached).toBe(23 * BLOCK);
    expect(again.predicted).toBe(String(24 * BLOCK));
  });

  it('is a decimal count on chat requests the router hashes as text', async () => {
    const response = await post(rig.base, '/v1/chat/completions', {
      model: MODEL,
      messages: [{ role: 'user', content: `chat ${http} ${'words '.repeat(200)}` }],
      max_tokens: 1,
    });
    expect(response.status).toBe(200);
    await response.text();
    expect(response.headers.get(HEADER)).toBe('0');
    expect(response.headers.get('x-kvroute-reason')).toMatch(/^[a-z_]+$/);
  });
});
