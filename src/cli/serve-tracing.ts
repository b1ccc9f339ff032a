/** serve's tracing settings, from its flag and OpenTelemetry's variables. */
import type { ProxyOptions } from '../proxy/proxy-options.js';
import {
  isSampleRatio,
  isSamplerName,
  SAMPLER_NAMES,
  tracesUrl,
  type TracingOptions,
} from '../proxy/observe/tracing-options.js';
import { ConfigError } from './config-error.js';

/**
 * Tracing (docs/tracing.md): `--otlp-endpoint`, else OpenTelemetry's own variables, read as its
 * SDKs read them: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the traces URL itself) or
 * OTEL_EXPORTER_OTLP_ENDPOINT (the collector, `/v1/traces` added); off with OTEL_SDK_DISABLED=true
 * or OTEL_TRACES_EXPORTER=none; OTEL_SERVICE_NAME names the service (default kvroute);
 * OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, if set, must be http/protobuf.
 */
export function tracingFrom(flag: string | undefined, env: NodeJS.ProcessEnv): ProxyOptions['tracing'] {
  const disabled =
    env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true' || env.OTEL_TRACES_EXPORTER?.trim() === 'none';
  let endpoint = flag;
  if (endpoint === undefined && !disabled) {
    const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
    const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
    endpoint = traces !== undefined && traces !== '' ? traces : base !== undefined && base !== '' ? base : undefined;
    for (const [name, value] of [
      ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', traces],
      ['OTEL_EXPORTER_OTLP_ENDPOINT', base],
    ] as const)
      if (value !== undefined && value !== '' && value === endpoint)
        try {
          tracesUrl(value);
        } catch {
          throw new ConfigError(`${name} must be an OTLP/HTTP collector URL, got ${JSON.stringify(value)}`);
        }
  }
  if (endpoint === undefined) return undefined;
  // kvroute sends OTLP/HTTP protobuf, the OTLP default; a variable asking for another is refused.
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL'] as const) {
    const protocol = env[name]?.trim();
    if (protocol === undefined || protocol === '') continue;
    if (protocol !== 'http/protobuf')
      throw new ConfigError(
        `${name} must be http/protobuf (kvroute exports traces over OTLP/HTTP as protobuf), got ${JSON.stringify(protocol)}`,
      );
    break;
  }
  const serviceName = env.OTEL_SERVICE_NAME?.trim();
  return { endpoint, ...(serviceName ? { serviceName } : {}), ...samplerFrom(env) };
}

/**
 * OTEL_TRACES_SAMPLER and, for the ratio samplers, OTEL_TRACES_SAMPLER_ARG (default 1.0), as
 * OpenTelemetry's SDKs read them; a sampler kvroute does not implement (jaeger_remote, xray) or a
 * ratio that is not a number from 0 to 1 is refused rather than traced otherwise than asked.
 */
function samplerFrom(env: NodeJS.ProcessEnv): Pick<TracingOptions, 'sampler' | 'sampleRatio'> {
  const sampler = env.OTEL_TRACES_SAMPLER?.trim();
  if (sampler === undefined || sampler === '') return {};
  if (!isSamplerName(sampler))
    throw new ConfigError(
      `OTEL_TRACES_SAMPLER must be one of ${SAMPLER_NAMES.join(', ')}, got ${JSON.stringify(sampler)}`,
    );
  const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  if (!sampler.endsWith('traceidratio') || arg === undefined || arg === '') return { sampler };
  const ratio = Number(arg);
  if (!isSampleRatio(ratio))
    throw new ConfigError(`OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1, got ${JSON.stringify(arg)}`);
  return { sampler, sampleRatio: ratio };
}
