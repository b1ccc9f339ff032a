/**
 * The client side of an exchange, as the proxy's handlers see it: the slice of uWebSockets.js's
 * HttpRequest and HttpResponse they use. uWS's own objects satisfy these interfaces; so do the
 * Node http shims (node-shims.ts), which is how one implementation serves `kvroute serve` and
 * the embedding handler alike.
 *
 * Rules inherited from uWS (every implementation must allow them, every caller must follow them):
 * the request head is valid only during the synchronous handler; an onData chunk only during
 * its callback; after onAborted the response must not be touched; writes made outside the
 * handler go inside cork().
 */
import type { RecognizedString, UwsRequest } from './uws.js';

/** The part of uWS.HttpRequest the proxy reads. */
export type ClientRequestHead = Pick<
  UwsRequest,
  'forEach' | 'getCaseSensitiveMethod' | 'getHeader' | 'getQuery' | 'getUrl'
>;

/**
 * The part of uWS.HttpResponse the proxy writes (uWS's own HttpResponse satisfies it). Chained
 * calls return the response; the other results are not used.
 */
export interface ClientResponse {
  onAborted(handler: () => void): unknown;
  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): unknown;
  cork(callback: () => void): unknown;
  writeStatus(status: RecognizedString): ClientResponse;
  writeHeader(key: RecognizedString, value: RecognizedString): ClientResponse;
  /** False when the client's buffer is full: wait for onWritable. */
  write(chunk: RecognizedString): boolean;
  onWritable(handler: (offset: number) => boolean): unknown;
  end(body?: RecognizedString, closeConnection?: boolean): unknown;
  close(): unknown;
}
