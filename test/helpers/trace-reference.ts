/**
 * A deliberately naive characterization, for differential tests: prefixes are strings,
 * tries are Sets, and session counts are Sets of session names. Quadratic in request length;
 * fine for the short traces tests generate.
 */
import type { TraceRequest } from '../../src/trace/types.js';

export interface ReferenceFigures {
  any: number[];
  intra: number[];
  shared: number[];
  reuse: { intra_session: number; cross_session: number; shared_prefix: number; unclassified: number };
}

function prefixes(ids: readonly number[]): string[] {
  const keys: string[] = [];
  let key = '';
  for (const id of ids) keys.push((key += `${id},`));
  return keys;
}

export function referenceCharacterize(requests: readonly TraceRequest[], minSessions = 8): ReferenceFigures {
  const sessionName = (request: TraceRequest, index: number): string =>
    request.sessionless ? `#${index}` : request.session;
  const sessionsOf = new Map<string, Set<string>>();
  requests.forEach((request, index) => {
    for (const key of prefixes(request.hashIds)) {
      if (!sessionsOf.has(key)) sessionsOf.set(key, new Set());
      sessionsOf.get(key)!.add(sessionName(request, index));
    }
  });
  const global = new Set<string>();
  const perSession = new Map<string, Set<string>>();
  const figures: ReferenceFigures = {
    any: [],
    intra: [],
    shared: [],
    reuse: { intra_session: 0, cross_session: 0, shared_prefix: 0, unclassified: 0 },
  };
  requests.forEach((request, index) => {
    const keys = prefixes(request.hashIds);
    const own = perSession.get(sessionName(request, index)) ?? new Set<string>();
    perSession.set(sessionName(request, index), own);
    const leading = (test: (key: string) => boolean): number => {
      let count = 0;
      while (count < keys.length && test(keys[count]!)) count++;
      return count;
    };
    const any = leading((key) => global.has(key));
    const intra = leading((key) => own.has(key));
    const shared = leading((key) => global.has(key) && sessionsOf.get(key)!.size >= minSessions);
    figures.any.push(any);
    figures.intra.push(intra);
    figures.shared.push(shared);
    for (let depth = 0; depth < any; depth++) {
      if (depth < shared) figures.reuse.shared_prefix++;
      else if (depth < intra) figures.reuse.intra_session++;
      else if (request.sessionless) figures.reuse.unclassified++;
      else figures.reuse.cross_session++;
    }
    for (const key of keys) {
      global.add(key);
      own.add(key);
    }
  });
  return figures;
}
