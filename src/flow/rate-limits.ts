/**
 * Per-tenant rate limits: requests per minute and tokens per minute, each a token bucket with a
 * burst. A request is let in when both buckets can pay for it (1 request; its input tokens),
 * and both are paid at once; its output tokens are charged as they stream (chargeOutput), which
 * may overdraw the token bucket, so a tenant's next requests wait for the refill.
 *
 * Tenants with no limit have no buckets: a check is one Map lookup. Limits are read from
 * `limitsOf` when a tenant's buckets are made and on reconfigure() (a live config change).
 */
import { TokenBucket } from './token-bucket.js';

export interface TenantRateLimits {
  /** Requests per minute; undefined: no limit. */
  rpm?: number;
  /** Requests let in at once from a full bucket (default: rpm). */
  rpmBurst?: number;
  /** Input + output tokens per minute; undefined: no limit. */
  tpm?: number;
  /** Tokens from a full bucket (default: tpm). */
  tpmBurst?: number;
}

export type RateLimit = 'rpm' | 'tpm';

/** Why a request was refused, and when the same request would pass. */
export interface RateRefusal {
  limit: RateLimit;
  retryAfterMs: number;
}

interface Buckets {
  requests: TokenBucket | undefined;
  tokens: TokenBucket | undefined;
}

/** Tenants with buckets remembered before the full (idle) ones are forgotten: a full bucket is a new one. */
const SWEEP_ABOVE = 10_000;

export class RateLimits {
  private readonly buckets = new Map<string, Buckets>();

  constructor(private readonly limitsOf: (tenant: string) => TenantRateLimits) {}

  /** Lets the request in and pays for it, or says which limit refused it (nothing is paid then). */
  admit(tenant: string, inputTokens: number, now: number): RateRefusal | undefined {
    const b = this.bucketsOf(tenant, now);
    if (b === undefined) return undefined;
    const requestWait = b.requests?.waitMs(1, now) ?? 0;
    if (requestWait > 0) return { limit: 'rpm', retryAfterMs: requestWait };
    const tokenWait = b.tokens?.waitMs(inputTokens, now) ?? 0;
    if (tokenWait > 0) return { limit: 'tpm', retryAfterMs: tokenWait };
    b.requests?.take(1, now);
    b.tokens?.take(inputTokens, now);
    return undefined;
  }

  /** Output tokens streamed to the tenant: charged to its token bucket, overdrawing it if need be. */
  chargeOutput(tenant: string, tokens: number, now: number): void {
    this.bucketsOf(tenant, now)?.tokens?.charge(tokens, now);
  }

  /** What the tenant's buckets hold now: undefined for a limit it does not have. */
  remaining(tenant: string, now: number): { requests?: number; tokens?: number } {
    const b = this.bucketsOf(tenant, now);
    return { requests: b?.requests?.available(now), tokens: b?.tokens?.available(now) };
  }

  /**
   * [tenant, requests, tokens] of every tenant whose buckets are not full now (undefined: a limit
   * it does not have). A tenant not listed holds full buckets, or has no limit. O(tenants with buckets).
   */
  *drawn(now: number): IterableIterator<[string, number | undefined, number | undefined]> {
    for (const [tenant, b] of this.buckets)
      if (!((b.requests?.isFull(now) ?? true) && (b.tokens?.isFull(now) ?? true)))
        yield [tenant, b.requests?.available(now), b.tokens?.available(now)];
  }

  /** The limits changed: every tenant's buckets take the new ones, keeping what they hold. */
  reconfigure(now: number): void {
    for (const [tenant, b] of [...this.buckets]) {
      const limits = this.limitsOf(tenant);
      b.requests = rebucket(b.requests, limits.rpm, limits.rpmBurst, now);
      b.tokens = rebucket(b.tokens, limits.tpm, limits.tpmBurst, now);
      if (b.requests === undefined && b.tokens === undefined) this.buckets.delete(tenant);
    }
  }

  private bucketsOf(tenant: string, now: number): Buckets | undefined {
    const known = this.buckets.get(tenant);
    if (known !== undefined) return known;
    const limits = this.limitsOf(tenant);
    if (limits.rpm === undefined && limits.tpm === undefined) return undefined;
    if (this.buckets.size >= SWEEP_ABOVE) this.forgetFull(now);
    const made = {
      requests: rebucket(undefined, limits.rpm, limits.rpmBurst, now),
      tokens: rebucket(undefined, limits.tpm, limits.tpmBurst, now),
    };
    this.buckets.set(tenant, made);
    return made;
  }

  /** Forgets every tenant whose buckets are full: remade full when it comes back, nothing is lost. */
  private forgetFull(now: number): void {
    for (const [tenant, b] of this.buckets)
      if ((b.requests?.isFull(now) ?? true) && (b.tokens?.isFull(now) ?? true)) this.buckets.delete(tenant);
  }
}

/** The bucket a limit wants: none without a limit, a full new one, or the old one with the new limit. */
function rebucket(
  bucket: TokenBucket | undefined,
  perMinute: number | undefined,
  burst: number | undefined,
  now: number,
): TokenBucket | undefined {
  if (perMinute === undefined) return undefined;
  if (bucket === undefined) return new TokenBucket(burst ?? perMinute, perMinute, now);
  bucket.reconfigure(burst ?? perMinute, perMinute, now);
  return bucket;
}
