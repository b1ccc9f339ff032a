// @ts-check
/**
 * haproxy.cfg for router replicas behind a round-robin balancer (docs/scale-out.md): HTTP mode,
 * so requests are balanced one by one, not per connection; each server health-checked over
 * HTTP/1.1 every 200 ms (out after 1 failure, back after 2 passes; uWebSockets.js refuses
 * haproxy's default HTTP/1.0 check without a Host); a request whose connection fails retried on
 * another server (`retries 3`, `option redispatch`). Used by scripts/replica-live.mjs and the
 * tests' haproxy helper, so the experiment and the test run the same balancer.
 *
 * @param {number} port the frontend's loopback port
 * @param {readonly string[]} servers host:port of each server
 * @param {string} checkPath the health check's path (`/ready` for kvroute serve)
 * @returns {string}
 */
export function haproxyConfig(port, servers, checkPath) {
  return [
    'global',
    '  maxconn 4096',
    'defaults',
    '  mode http',
    '  timeout connect 2s',
    '  timeout client 300s',
    '  timeout server 300s',
    '  retries 3',
    '  option redispatch',
    'frontend replicas_in',
    `  bind 127.0.0.1:${port}`,
    '  default_backend replicas',
    'backend replicas',
    '  balance roundrobin',
    '  option httpchk',
    `  http-check send meth GET uri ${checkPath} ver HTTP/1.1 hdr host localhost`,
    ...servers.map((server, k) => `  server replica${k} ${server} check inter 200 fall 1 rise 2`),
    '',
  ].join('\n');
}
