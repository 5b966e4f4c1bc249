import { BurstyRateLimiter, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Config } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import type { LimiterBackend } from '../auth/limiter-backend.js';
import { rateLimited } from '../auth/login-throttle.js';
import type { Principal } from '../auth/principal.js';
import type { RouteDefinition } from './route.js';

type Budget = 'requests' | 'poses';

interface Policy {
  budget: Budget;
  perSecond: number;
  burst: number;
  /** Seconds the steady rate takes to refill the burst. */
  burstSeconds: number;
  limiter: Pick<RateLimiterAbstract, 'consume'>;
}

/** What the HTTP server holds for one request: the headers to answer with, and the pose count once the body is known. */
export interface RequestLimit {
  headers: Record<string, string>;
  afterBody(body: unknown): Promise<void>;
}

/** The credential a budget belongs to: the API key behind the request, else the user. */
const budgetKey = (principal: Principal) => (principal.apiKeyId ? `key:${principal.apiKeyId}` : `user:${principal.userId}`);

/** Poses in an upload body (`{ poses: [...] }`); 0 for anything else. */
const posesIn = (body: unknown): number => {
  const poses = (body as { poses?: unknown } | undefined)?.poses;
  return Array.isArray(poses) ? poses.length : 0;
};

/**
 * Per-credential budgets: every API key and every user has a steady rate per second plus a burst on top
 * (rate-limiter-flexible's BurstyRateLimiter: a one-second window, and when it is spent a burst allowance
 * that the steady rate refills), one for requests and one for uploaded poses (counted per pose). An API key
 * may override the steady rates; its burst scales with them. Counters live in Redis when configured, so
 * all gateways share a budget. Over budget: 429 `rate_limited` with Retry-After and the IETF draft's
 * `RateLimit` / `RateLimit-Policy` headers. A limiter store failure lets the request through (logged).
 */
export class RateLimits {
  private readonly policies = new Map<string, Policy>();

  constructor(
    private readonly backend: LimiterBackend,
    private readonly config: Config,
    private readonly logger?: Logger,
  ) {}

  private policy(budget: Budget, override: number | null | undefined): Policy {
    const perSecondDefault = budget === 'requests' ? this.config.RATE_LIMIT_REQUESTS_PER_SECOND : this.config.RATE_LIMIT_POSES_PER_SECOND;
    const burstDefault = budget === 'requests' ? this.config.RATE_LIMIT_BURST : this.config.RATE_LIMIT_POSES_BURST;
    const perSecond = override ?? perSecondDefault;
    const id = `${budget}:${perSecond}`;
    let policy = this.policies.get(id);
    if (policy) return policy;
    const burst = Math.round((burstDefault * perSecond) / perSecondDefault);
    const burstSeconds = Math.max(1, Math.ceil(burst / perSecond));
    const steady = this.backend.create({ name: `rate:${budget}:${perSecond}`, points: perSecond, durationSeconds: 1 });
    const limiter = burst > 0 ? new BurstyRateLimiter(steady, this.backend.create({ name: `rate:${budget}-burst:${perSecond}:${burst}`, points: burst, durationSeconds: burstSeconds })) : steady;
    policy = { budget, perSecond, burst, burstSeconds, limiter };
    this.policies.set(id, policy);
    return policy;
  }

  /**
   * Counts `requests` requests and `poses` uploaded poses against the caller's budgets. Returns the
   * RateLimit headers of the budgets counted; throws 429 when one is spent.
   */
  async consume(principal: Principal, { requests = 1, poses = 0 }: { requests?: number; poses?: number } = {}): Promise<Record<string, string>> {
    const key = budgetKey(principal);
    const spend: [Policy, number][] = [];
    if (requests > 0) spend.push([this.policy('requests', principal.limits?.requestsPerSecond), requests]);
    if (poses > 0) spend.push([this.policy('poses', principal.limits?.posesPerSecond), poses]);
    const results = await Promise.all(
      spend.map(([policy, points]) =>
        policy.limiter.consume(key, points).then(
          (res) => ({ policy, res, ok: true }),
          (reason: unknown) => {
            if (reason instanceof RateLimiterRes) return { policy, res: reason, ok: false };
            this.logger?.warn({ err: reason }, 'rate limiter unavailable; request let through');
            return undefined;
          },
        ),
      ),
    );
    const counted = results.filter((result) => result !== undefined);
    if (counted.length === 0) return {};
    const headers = {
      'ratelimit-policy': counted.map(({ policy }) => `"${policy.budget}";q=${policy.perSecond};w=1` + (policy.burst > 0 ? `, "${policy.budget}-burst";q=${policy.burst};w=${policy.burstSeconds}` : '')).join(', '),
      ratelimit: counted.map(({ policy, res }) => `"${policy.budget}";r=${Math.max(0, res.remainingPoints)};t=${Math.max(0, Math.ceil(res.msBeforeNext / 1000))}`).join(', '),
    };
    const refused = counted.filter((result) => !result.ok);
    if (refused.length > 0) {
      const waitMs = Math.max(...refused.map(({ res }) => res.msBeforeNext));
      throw rateLimited(`Rate limit exceeded (${refused.map(({ policy }) => policy.budget).join(', ')}); retry later`, waitMs, headers);
    }
    return headers;
  }

  /**
   * The HTTP server's hook, called once the caller is known and before the body is read (so a request over
   * budget costs no parsing); a position upload's poses are counted once its body is validated.
   */
  readonly forRequest = async (principal: Principal, route: RouteDefinition): Promise<RequestLimit> => {
    const headers = await this.consume(principal);
    return {
      headers,
      afterBody: async (body) => {
        const poses = route.allowPositioningKey ? posesIn(body) : 0;
        if (poses === 0) return;
        const posesHeaders = await this.consume(principal, { requests: 0, poses });
        for (const name of ['ratelimit-policy', 'ratelimit'] as const) {
          if (posesHeaders[name]) headers[name] = headers[name] ? `${headers[name]}, ${posesHeaders[name]}` : posesHeaders[name];
        }
      },
    };
  };
}
