/**
 * uWebSockets.js behind one typed module: the only file in src/ that imports 'uWebSockets.js'.
 * Everything else takes its types and calls from here.
 *
 * Why a wrapper: uWS is not on npm; package.json aliases the name to
 * `@trufflesuite/uws-js-unofficial` (20.30), whose index.d.ts is the contract (docs/index.d.ts)
 * but differs from the native module in two places the proxy meets:
 * - the native `listen(host, port, options, cb)` (a host AND listen options) has no overload in
 *   the typings: it is declared below, by module augmentation, so no call site casts;
 * - `ListenOptions` is declared as an enum, but the native module exports no such object (only
 *   an untyped `LIBUS_LISTEN_EXCLUSIVE_PORT`): `uWS.ListenOptions.…` throws at run time. The
 *   values are the constants below.
 *
 * uWS rules every user of these types follows (the typings' own comments): register
 * onAborted before anything asynchronous and never touch a response after it; copy what the
 * request holds during the synchronous handler; an onData chunk is valid only during its
 * callback; writes made outside the handler go inside cork().
 */
import uWS from 'uWebSockets.js';

declare module 'uWebSockets.js' {
  interface TemplatedApp {
    /** Listens on host and port with listen options (the native overload the typings lack). */
    listen(
      host: RecognizedString,
      port: number,
      options: number,
      cb: (listenSocket: us_listen_socket | false) => void | Promise<void>,
    ): TemplatedApp;
  }
}

/** A uWS app (non-TLS): routes are registered on it, then it listens. */
export type UwsApp = uWS.TemplatedApp;
/** uWS's request head: valid only during the synchronous route handler. */
export type UwsRequest = uWS.HttpRequest;
/** uWS's response: dead after onAborted. */
export type UwsResponse = uWS.HttpResponse;
/** What uWS takes as a string: a string or bytes. */
export type RecognizedString = uWS.RecognizedString;
/** A listening socket, to read its port and to close it. */
export type ListenSocket = uWS.us_listen_socket;

/** uSockets' LIBUS_LISTEN_DEFAULT: SO_REUSEPORT, so threads of one process share the port. */
const LIBUS_LISTEN_DEFAULT = 0;
/** uSockets' LIBUS_LISTEN_EXCLUSIVE_PORT: no SO_REUSEPORT, so a taken port fails instead of being shared. */
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;

/** A new (non-TLS) uWS app. */
export function createUwsApp(): UwsApp {
  return uWS.App();
}

/**
 * Listens on host:port: exclusively (a taken port fails), or sharing the port with the other
 * threads of the process. `done` gets the listen socket, or false when uWS could not listen
 * (it says no more than that; the caller finds out why).
 */
export function listenUws(
  app: UwsApp,
  host: string,
  port: number,
  exclusive: boolean,
  done: (socket: ListenSocket | false) => void,
): void {
  app.listen(host, port, exclusive ? LIBUS_LISTEN_EXCLUSIVE_PORT : LIBUS_LISTEN_DEFAULT, done);
}

/** The local port a listen socket is bound to. */
export function listenSocketPort(socket: ListenSocket): number {
  return uWS.us_socket_local_port(socket);
}

/** Stops accepting on a listen socket (open connections stay). */
export function closeListenSocket(socket: ListenSocket): void {
  uWS.us_listen_socket_close(socket);
}
