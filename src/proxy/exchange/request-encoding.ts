/**
 * Compressed request bodies (`Content-Encoding`): gzip (and x-gzip), deflate and br are decoded
 * before parsing, off the event loop (zlib's threadpool). The engine gets the decoded bytes
 * without the header (vLLM and SGLang do not decode request bodies). Any other coding is refused
 * with 415 and `Accept-Encoding` (RFC 9110 §15.5.16), before the body is read. (zstd: Node 20
 * has no zstd decoder, so it is refused like any other unknown coding.)
 *
 * Compression bombs. A few hundred compressed bytes can inflate into gigabytes, so the decoder
 * is a streaming one and every chunk it produces is paid for before it is kept: `charge(bytes)`
 * (the caller's body budget, --max-body-memory) and the running total against --max-body. The
 * first chunk either refuses destroys the decoder at once (zlib frees its state; the chunks kept
 * so far are dropped), so no request ever holds more than its cap plus one chunk (CHUNK_BYTES),
 * and the budget sees decoded bytes as they appear, not after the whole body was inflated.
 *
 * Decoder state outside the budget: a brotli decoder holds a ring buffer of up to 16 MiB (its
 * window; Node never enables brotli's large windows), a gzip or deflate one 32 KiB. At most
 * DECODERS_AT_ONCE decoders run at once per event loop; later bodies wait in order (zlib runs on
 * libuv's 4 threadpool threads, so more at once would not decode faster, only hold more state).
 */
import type { Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';

import { ClientError, echo } from '../server/error-body.js';

export type BodyEncoding = 'identity' | 'gzip' | 'deflate' | 'br';

/** Sent with a 415: the codings the proxy decodes. */
export const ACCEPT_ENCODING = ['accept-encoding', 'gzip, deflate, br'] as const;

/** The size of one decoded chunk: the most a request can be over its cap or the budget by, briefly. */
export const CHUNK_BYTES = 64 * 1024;

/** Decoders running at once (per event loop); see the header. */
export const DECODERS_AT_ONCE = 4;

/** The coding a Content-Encoding value names ('' when absent), or undefined when the proxy cannot decode it. */
export function bodyEncoding(header: string): BodyEncoding | undefined {
  const value = header.trim().toLowerCase();
  if (value === '' || value === 'identity') return 'identity';
  if (value === 'gzip' || value === 'x-gzip') return 'gzip';
  if (value === 'deflate' || value === 'br') return value;
  return undefined;
}

export function unsupportedEncoding(header: string): ClientError {
  return new ClientError(
    415,
    `Content-Encoding ${JSON.stringify(echo(header))} is not supported; send the body plain, or as gzip, deflate or br`,
    'unsupported_encoding',
  );
}

/** Pays for `bytes` more decoded bytes; a ClientError (or null: the request is over) stops the decoder. */
export type ChargeDecoded = (bytes: number) => ClientError | null | undefined;

/** The decoder stopped because the request ended first (the client left): nobody reads this. */
export class DecodeAbandoned extends Error {}

function decoderFor(encoding: Exclude<BodyEncoding, 'identity'>): Transform {
  const options = { chunkSize: CHUNK_BYTES };
  if (encoding === 'gzip') return createGunzip(options);
  if (encoding === 'deflate') return createInflate(options);
  return createBrotliDecompress(options);
}

let running = 0;
const waiting: Array<() => void> = [];

/** Runs `start` once fewer than DECODERS_AT_ONCE decoders run; it calls `done` when its decoder closed (idempotent). */
function whenDecoderFree(start: (done: () => void) => void): void {
  const run = () => {
    running++;
    let ended = false;
    start(() => {
      if (ended) return;
      ended = true;
      running--;
      waiting.shift()?.();
    });
  };
  if (running < DECODERS_AT_ONCE) run();
  else waiting.push(run);
}

/** Decoders running now (tests). */
export function decodersRunning(): number {
  return running;
}

/**
 * Decodes a body chunk by chunk, paying for each decoded chunk with `charge` first. Rejects with a
 * ClientError: 413 past `maxBytes` decoded, 400 when the bytes are not that coding, or charge's
 * own refusal; with DecodeAbandoned when charge says the request is over.
 */
export function decodeBody(
  bytes: Buffer,
  encoding: Exclude<BodyEncoding, 'identity'>,
  maxBytes: number,
  charge: ChargeDecoded,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    whenDecoderFree((done) => {
      const decoder = decoderFor(encoding);
      let chunks: Buffer[] = [];
      let size = 0;
      let settled = false;
      const stop = (error: Error) => {
        if (settled) return;
        settled = true;
        chunks = [];
        decoder.destroy();
        reject(error);
      };
      decoder.on('data', (chunk: Buffer) => {
        if (settled) return;
        size += chunk.length;
        if (size > maxBytes) return stop(decodedTooLarge(maxBytes));
        const refused = charge(chunk.length);
        if (refused === null) return stop(new DecodeAbandoned('the request ended while its body was decoded'));
        if (refused !== undefined) return stop(refused);
        chunks.push(chunk);
      });
      decoder.on('error', (error: Error) =>
        stop(new ClientError(400, `the request body is not valid ${encoding} (${error.message})`, 'invalid_json')),
      );
      decoder.on('end', () => {
        if (settled) return;
        settled = true;
        resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
        chunks = [];
      });
      // The slot is free once zlib let go of its state: 'close' follows both end and destroy()
      // (a destroy() during a threadpool pass closes the handle when that pass returns).
      decoder.on('close', done);
      decoder.end(bytes);
    });
  });
}

export function decodedTooLarge(maxBytes: number): ClientError {
  return new ClientError(413, `the decoded request body exceeds --max-body (${maxBytes} bytes)`, 'body_too_large');
}
