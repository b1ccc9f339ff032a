/**
 * The proxy inside a Fastify server: `fastify.register(kvrouteFastify(proxy))`.
 *
 * An onRequest hook takes the proxy's paths before Fastify parses the body, hijacks the reply
 * and hands the raw Node request and response to `proxy.handleNode`, so the request streams
 * exactly as through `kvroute serve` (no body re-encoding, SSE relayed chunk by chunk). Every
 * other path stays Fastify's. The plugin is not encapsulated (the `skip-override` symbol that
 * the fastify-plugin package sets), so the hook covers the whole server, not one prefix.
 *
 * Fastify is not a dependency of kvroute: the types below are the few members the plugin uses.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

import type { Proxy } from './proxy-server.js';

interface FastifyLike {
  addHook(
    name: 'onRequest',
    hook: (
      request: { raw: IncomingMessage },
      reply: { raw: ServerResponse; hijack(): void },
      done: (error?: Error) => void,
    ) => void,
  ): unknown;
}

export type FastifyPlugin = ((fastify: FastifyLike, options: unknown, done: (error?: Error) => void) => void) & {
  [key: symbol]: unknown;
};

export function kvrouteFastify(proxy: Proxy): FastifyPlugin {
  const register = (fastify: FastifyLike, _options: unknown, done: (error?: Error) => void): void => {
    fastify.addHook('onRequest', (request, reply, next) => {
      const url = request.raw.url ?? '/';
      const query = url.indexOf('?');
      if (!proxy.owns(query < 0 ? url : url.slice(0, query))) return next();
      reply.hijack();
      proxy.handleNode(request.raw, reply.raw);
    });
    done();
  };
  return Object.assign(register, {
    [Symbol.for('skip-override')]: true,
    [Symbol.for('fastify.display-name')]: 'kvroute',
  });
}
