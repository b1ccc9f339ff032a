/**
 * A thread's answer to every request that is not on its data path (/metrics, the dashboard, the
 * admin API, unknown paths): relayed over loopback HTTP to the primary's control listener, which
 * serves it with the process's one metrics registry, dashboard and admin API
 * (docs/scale-out.md). The kernel spreads connections over the threads' listeners, so any thread
 * may receive any request.
 *
 * The response streams back chunk by chunk (the dashboard's event stream never ends); a client
 * that goes away aborts the relayed request. Hazard: the relay does not wait for the client's
 * backpressure, so a control response is held in memory while a slow client reads it: control
 * responses are small (a scrape, a page, an SSE frame), never a completion.
 */
import { STATUS_CODES } from 'node:http';

import { Pool } from 'undici';

import type { ClientResponse } from '../server/client-io.js';
import { sendClientError } from '../server/client-response.js';
import { ClientError } from '../server/error-body.js';
import type { RouteHandler } from '../server/route-table.js';

/** Request headers a relay must not forward (hop-by-hop, or recomputed by undici). */
const DROPPED_REQUEST = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'upgrade']);
/** Response headers uWS writes itself, or that describe the primary's connection only. */
const DROPPED_RESPONSE = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date']);

export class ControlRelay {
  private readonly pool: Pool;

  constructor(origin: string) {
    this.pool = new Pool(origin, { connections: 8, pipelining: 1 });
  }

  readonly handle: RouteHandler = (res, req) => {
    const method = req.getCaseSensitiveMethod();
    const query = req.getQuery();
    const path = req.getUrl() + (query ? `?${query}` : '');
    const headers: Record<string, string> = {};
    req.forEach((name, value) => {
      if (!DROPPED_REQUEST.has(name)) headers[name] = value;
    });
    const abort = new AbortController();
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
      abort.abort();
    });
    const chunks: Buffer[] = [];
    res.onData((chunk, last) => {
      // uWS reuses the chunk's memory after this callback returns: copy it.
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (last) this.forward(res, method, path, headers, Buffer.concat(chunks), abort.signal, () => aborted);
    });
  };

  private forward(
    res: ClientResponse,
    method: string,
    path: string,
    headers: Record<string, string>,
    body: Buffer,
    signal: AbortSignal,
    aborted: () => boolean,
  ): void {
    const hasBody = method !== 'GET' && method !== 'HEAD';
    this.pool
      .request({ path, method: method as 'GET', headers, body: hasBody ? body : null, signal })
      .then(({ statusCode, headers: upstream, body: stream }) => {
        if (aborted()) return void stream.destroy();
        res.cork(() => {
          res.writeStatus(`${statusCode} ${STATUS_CODES[statusCode] ?? ''}`);
          for (const [name, value] of Object.entries(upstream)) {
            if (DROPPED_RESPONSE.has(name) || value === undefined) continue;
            for (const v of Array.isArray(value) ? value : [value]) res.writeHeader(name, v);
          }
        });
        const parts: Buffer[] = [];
        let streaming = false;
        stream.on('data', (chunk: Buffer) => {
          if (aborted()) return;
          // Buffer until the first pause: a whole small response goes out with a content-length.
          parts.push(chunk);
          if (!streaming && parts.length < 2) return;
          streaming = true;
          const out = Buffer.concat(parts.splice(0));
          res.cork(() => res.write(out));
        });
        stream.on('end', () => {
          if (aborted()) return;
          const rest = Buffer.concat(parts);
          res.cork(() => res.end(rest));
        });
        stream.on('error', () => {
          if (!aborted()) res.cork(() => res.close());
        });
      })
      .catch((error: Error) => {
        if (aborted()) return;
        res.cork(() =>
          sendClientError(
            res,
            new ClientError(502, `this thread could not reach the main thread (${error.message})`, 'upstream_error'),
          ),
        );
      });
  }

  close(): Promise<void> {
    return this.pool.destroy();
  }
}
