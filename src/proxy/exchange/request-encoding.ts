/**
 * Compressed request bodies (`Content-Encoding`): gzip (and x-gzip), deflate and br are decoded
 * before parsing, off the event loop (zlib's threadpool), with the decoded size capped at
 * `--max-body` so a small compressed body cannot inflate into gigabytes. The engine gets the
 * decoded bytes without the header (vLLM and SGLang do not decode request bodies). Any other
 * coding is refused with 415 and `Accept-Encoding` (RFC 9110 §15.5.16), before the body is read.
 */
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate, type ZlibOptions } from 'node:zlib';

import { ClientError } from '../server/error-body.js';

export type BodyEncoding = 'identity' | 'gzip' | 'deflate' | 'br';

/** Sent with a 415: the codings the proxy decodes. */
export const ACCEPT_ENCODING = ['accept-encoding', 'gzip, deflate, br'] as const;

const DECODERS = {
  gzip: promisify(gunzip),
  deflate: promisify(inflate),
  br: promisify(brotliDecompress),
} as const;

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
    `Content-Encoding ${JSON.stringify(header)} is not supported; send the body plain, or as gzip, deflate or br`,
    'unsupported_encoding',
  );
}

/** Decodes a body; rejects with a ClientError: 413 past `maxBytes` decoded, 400 when the bytes are not that coding. */
export async function decodeBody(
  bytes: Buffer,
  encoding: Exclude<BodyEncoding, 'identity'>,
  maxBytes: number,
): Promise<Buffer> {
  try {
    return await DECODERS[encoding](bytes, { maxOutputLength: maxBytes } as ZlibOptions);
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE')
      throw new ClientError(413, `the decoded request body exceeds --max-body (${maxBytes} bytes)`, 'body_too_large');
    throw new ClientError(
      400,
      `the request body is not valid ${encoding} (${(error as Error).message})`,
      'invalid_json',
    );
  }
}
