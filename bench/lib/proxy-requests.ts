/** The request bodies the proxy benchmarks send (bench/proxy.ts, bench/proxy-steps.ts). */
import type { Target } from './proxy-load.js';

/** Sessions the requests cycle through. */
export const SESSIONS = 64;

/**
 * Chat requests of SESSIONS sessions: a ~1 kB prompt and 64 block ids each, the first 8 blocks
 * shared by every session (the system prompt), the rest the session's own; the session id in
 * `x-session-id`. Every connection cycles through them (stream i of the 1,000 is session
 * i mod SESSIONS), so a cache-aware router sees many sessions and can spread them over its backends.
 * Without `hashIds` the body has no `hash_ids`, so a router hashes the prompt itself.
 */
export function chatRequests(stream: boolean, chunks: number, hashIds = true): Target['requests'] {
  return Array.from({ length: SESSIONS }, (_, session) => ({
    headers: { 'x-session-id': `bench-session-${session}` },
    body: JSON.stringify({
      model: 'stub',
      messages: [
        { role: 'system', content: 'You are a coding agent. '.repeat(20) },
        { role: 'user', content: `Session ${session}: fix the failing test in src/proxy/relay.ts. `.repeat(12) },
      ],
      max_tokens: chunks,
      ...(hashIds
        ? { hash_ids: Array.from({ length: 64 }, (_, i) => (i < 8 ? i + 1 : 1_000_003 * (session + 1) + i)) }
        : {}),
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    }),
  }));
}
