/**
 * Which request headers name a request's session, in precedence order: the configured session
 * header (`x-session-id` by default), then the headers coding agents already send
 * (`agentSessionHeaders`), so an agent gets session affinity with no client change. The body's
 * `user` comes after all of them (request-inputs.ts).
 *
 * What the agents send (docs/proxy.md "Sessions"; checked against NVIDIA Dynamo's agent
 * session-id docs, which test the same headers, and the agents' own requests):
 *
 *   Claude Code           x-claude-code-session-id (subagents add x-claude-code-agent-id)
 *   Codex CLI             session-id (older releases: session_id)
 *   OpenCode              x-session-id (its Zen gateway: x-opencode-session)
 *   Qwen Code             x-qwen-code-session-id
 *   Dynamo's own clients  x-dynamo-session-id
 *
 * Invariant: names are lower case (Node and uWS hand headers over lower-cased), unique, and the
 * rank of a name is its position in the list; a lower rank wins when a request carries several.
 */
export const AGENT_SESSION_HEADERS: readonly string[] = [
  'x-claude-code-session-id',
  'session-id',
  'session_id',
  'x-opencode-session',
  'x-qwen-code-session-id',
  'x-dynamo-session-id',
];

/** A header name as RFC 9110 allows it (a token). */
export const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

/**
 * Rank by header name: 0 for the configured header, then the agents' in order. The session header
 * is listed once even when the agent list repeats it.
 */
export function sessionHeaderRanks(
  sessionHeader: string,
  agentHeaders: readonly string[],
): ReadonlyMap<string, number> {
  const ranks = new Map<string, number>();
  for (const name of [sessionHeader, ...agentHeaders]) if (!ranks.has(name)) ranks.set(name, ranks.size);
  return ranks;
}
