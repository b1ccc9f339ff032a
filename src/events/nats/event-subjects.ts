/**
 * Names on the fleet's event plane over NATS JetStream (docs/scale-out.md, "One event plane over
 * NATS"): one stream per fleet, one subject per engine, and the headers every message carries.
 *
 * An engine is named by its backend URL (the one `serve --backends` lists), so a relay and the
 * replicas agree on it without another name to configure. A URL holds characters a NATS subject
 * token cannot (`.`, `:`, `/`), so the token escapes every character outside [A-Za-z0-9-] as `_XX`
 * (its UTF-8 bytes in upper-case hex): reversible, and still readable in `nats stream view`.
 */

/** The stream of a fleet's engine events. */
export const eventStreamName = (fleet: string): string => `KVROUTE_${fleet}_EVENTS`;

/** Every engine's subject of a fleet (the stream's subject filter). */
export const eventSubjects = (fleet: string): string => `kvroute.${fleet}.events.>`;

/** One engine's subject. */
export const eventSubject = (fleet: string, engine: string): string => `kvroute.${fleet}.events.${engineToken(engine)}`;

/** The engine's sequence number of the message (vLLM's `seq`), in decimal. */
export const SEQ_HEADER = 'Kvroute-Seq';
/**
 * Present on a reset marker (a message with no payload): the events before it cannot be trusted
 * to describe the engine (its restart, a gap the relay could not replay, a publish that failed).
 * Its value says why. A consumer empties the engine's index and rebuilds it from what follows.
 */
export const RESET_HEADER = 'Kvroute-Reset';
/** The engine's backend URL, for people reading the stream. */
export const ENGINE_HEADER = 'Kvroute-Engine';

export type ResetReason = 'engine-restart' | 'gap' | 'publish-failed';

/** The engine's subject token: [A-Za-z0-9-] kept, every other byte as `_XX`. */
export function engineToken(engine: string): string {
  let out = '';
  for (const byte of Buffer.from(engine, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9-]/.test(c) ? c : `_${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** The engine a token names; undefined when it is not one engineToken() makes. */
export function engineFromToken(token: string): string | undefined {
  const bytes: number[] = [];
  for (let i = 0; i < token.length; i++) {
    const c = token[i]!;
    if (/[A-Za-z0-9-]/.test(c)) bytes.push(c.charCodeAt(0));
    else if (c === '_' && /^[0-9A-F]{2}$/.test(token.slice(i + 1, i + 3))) {
      bytes.push(parseInt(token.slice(i + 1, i + 3), 16));
      i += 2;
    } else return undefined;
  }
  return Buffer.from(bytes).toString('utf8');
}
