// @ts-check
/**
 * The steady load: `concurrency` workers, each a closed loop of multi-turn chat sessions through
 * the proxy (a session resends its growing history, so turns hit the engine's prefix cache), half
 * of them streamed with `stream_options.include_usage`. Bounded in count (`maxRequests`) and time
 * (stops issuing once `running()` says so; every request has header and body timeouts). Loopback only.
 */
import { Agent, request } from 'undici';

import { errorCode, readStream } from './outcomes.mjs';
import { seededRandom } from './random.mjs';

const SYSTEM =
  'You are a coding agent working in the kvroute repository. Tools: read_file, write_file, run_tests, ' +
  'grep. Keep answers short, cite the files you touched, and never change a test to make it pass. ' +
  'The router places each request on the engine most likely to hold its prompt in its prefix cache.';
const WORDS =
  'router engine cache block prefix session stream token policy proxy drain health event replay index'.split(' ');
const MAX_TURNS = 6;
/** Longest wait for a response head or between two body chunks: far beyond any injected stall. */
export const CLIENT_TIMEOUT_MS = 60_000;

/**
 * @param {() => number} random
 * @param {number} words
 */
function sentence(random, words) {
  const out = [];
  for (let i = 0; i < words; i++) out.push(WORDS[Math.floor(random() * WORDS.length)]);
  return out.join(' ');
}

/**
 * A client for the proxy: one undici Agent, closed at the end so its sockets count as gone.
 * @param {number} concurrency
 */
export function createClient(concurrency) {
  return new Agent({ connections: concurrency + 8, headersTimeout: CLIENT_TIMEOUT_MS, bodyTimeout: CLIENT_TIMEOUT_MS });
}

/**
 * Sends one chat request and records its outcome.
 * @param {{ base: string, agent: Agent, outcomes: import('./outcomes.mjs').Outcomes }} ctx
 * @param {{ body: object, stream: boolean, session: string, kind: string }} req
 * @returns {Promise<any>} the response's usage when completed
 */
export async function sendChat(ctx, req) {
  const at = Date.now();
  ctx.outcomes.sent++;
  let status = 0;
  try {
    const res = await request(`${ctx.base}/v1/chat/completions`, {
      method: 'POST',
      dispatcher: ctx.agent,
      headers: { 'content-type': 'application/json', 'x-session-id': req.session },
      body: JSON.stringify(req.body),
    });
    status = res.statusCode;
    const text = await res.body.text();
    if (status !== 200) {
      ctx.outcomes.record('failed', { kind: req.kind, at, cause: `${status} ${errorCode(text)}` });
      return null;
    }
    const predicted = Number(res.headers['x-kvroute-predicted-cached-tokens']);
    let usage;
    if (req.stream) {
      const sse = readStream(text);
      if (sse.error !== null) {
        ctx.outcomes.record('failed', { kind: req.kind, at, cause: `200 then SSE error ${sse.error}` });
        return null;
      }
      if (!sse.done) {
        ctx.outcomes.record('lost', { kind: req.kind, at, cause: 'stream ended without [DONE] or an error event' });
        return null;
      }
      usage = sse.usage;
    } else {
      const body = JSON.parse(text);
      if (!Array.isArray(body.choices)) throw new Error(`200 without choices: ${text.slice(0, 80)}`);
      usage = body.usage;
    }
    ctx.outcomes.record('completed', { kind: req.kind, at, stream: req.stream });
    const cached = usage?.prompt_tokens_details?.cached_tokens;
    if (Number.isFinite(predicted) && typeof cached === 'number') ctx.outcomes.observePrediction(predicted, cached);
    return usage ?? {};
  } catch (error) {
    const err = /** @type {Error & { code?: string }} */ (error);
    const where = status === 0 ? 'before any status' : `after status ${status}`;
    ctx.outcomes.record('lost', { kind: req.kind, at, cause: `no answer ${where}: ${err.code ?? err.message}` });
    return null;
  }
}

/**
 * Runs the workers while `running()` holds, for at most `maxRequests` requests.
 * @param {{ base: string, agent: Agent, outcomes: import('./outcomes.mjs').Outcomes, model: string,
 *   concurrency: number, seed: number, running: () => boolean, maxRequests: number }} options
 */
export async function runLoad(options) {
  let issued = 0;
  /** @param {number} worker */
  const loop = async (worker) => {
    const random = seededRandom(options.seed * 1000 + worker);
    let sessionNo = 0;
    while (options.running() && issued < options.maxRequests) {
      const session = `soak-${options.seed}-${worker}-${sessionNo++}`;
      /** @type {{ role: string, content: string }[]} */
      const messages = [{ role: 'system', content: SYSTEM }];
      for (let turn = 0; turn < MAX_TURNS && options.running() && issued < options.maxRequests; turn++) {
        issued++;
        messages.push({ role: 'user', content: sentence(random, 20 + Math.floor(random() * 80)) });
        const stream = random() < 0.5;
        const maxTokens = 4 + Math.floor(random() * 28);
        /** @type {Record<string, unknown>} */
        const body = { model: options.model, messages, max_tokens: maxTokens, stream };
        if (stream) body.stream_options = { include_usage: true };
        const usage = await sendChat(options, { body, stream, session, kind: 'load' });
        if (usage === null) break; // a failed turn ends the session, as an agent would retry afresh
        messages.push({ role: 'assistant', content: ' tok'.repeat(usage.completion_tokens ?? maxTokens) });
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, (_, worker) => loop(worker)));
  return issued;
}
