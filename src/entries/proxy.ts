/**
 * kvroute/proxy: the OpenAI-compatible routing proxy (src/proxy/) on uWebSockets.js or Node's
 * http, its metrics (prom-client), admin API, dashboard and access log. Loads the server stack.
 */
export { createProxy, type NodeHandler, type Proxy } from '../proxy/server/proxy-server.js';
export { kvrouteFastify, type FastifyPlugin } from '../proxy/server/fastify-plugin.js';
export { createProxyMetrics, type ProxyMetrics, type ProxyMetricsOptions } from '../proxy/observe/proxy-metrics.js';
export { adminMount } from '../proxy/observe/admin-api.js';
export { createDashboard, type Dashboard, type DashboardOptions } from '../proxy/observe/dashboard/dashboard.js';
export type { DashboardFrame, InstanceFrame } from '../proxy/observe/dashboard/dashboard-frame.js';
export { PROXY_DEFAULTS, type BackendSpec, type ProxyMount, type ProxyOptions } from '../proxy/proxy-options.js';
export type {
  ProxyObserver,
  RequestOutcome,
  RequestRecord,
  UpstreamErrorKind,
  UsageCounts,
} from '../proxy/observe/proxy-observer.js';
export type { MountApp, RouteHandler } from '../proxy/server/route-table.js';
export type { ClientRequestHead, ClientResponse } from '../proxy/server/client-io.js';
export type { ModelCard } from '../proxy/upstream/backend.js';
export { openAccessLog, formatRecord, type AccessLog, type AccessLogOptions } from '../proxy/observe/access-log.js';
export type { BackendSnapshot, ModelAvailability, ProxyState } from '../proxy/proxy-state.js';
