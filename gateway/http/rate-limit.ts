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

/**
 * A key's own rate, rounded down to the nearest 1, 2 or 5 × 10^n: the limiters kept are then a few per
 * decade of the platform maximum, whatever rates admins choose, and rounding down never widens a budget.
 */
export function rateTier(perSecond: number): number {
  const decade = 10 ** Math.floor(Math.log10(perSecond));
  const step = [5, 2, 1].find((multiple) => multiple * decade <= perSecond)!;
  return step * decade;
}

/** Poses in an upload body (`{ poses: [...] }`); 0 for anything else. */
const posesIn = (body: unknown): number => {
  const poses = (body as { poses?: unknown } | undefined)?.poses;
  return Array.isArray(poses) ? poses.length : 0;
};

/**
 * Per-credential budgets: every API key and every user has a steady rate per second plus a burst on top
 * (rate-limiter-flexible's BurstyRateLimiter: a one-second window, and when it is spent a burst allowance
 * that the steady rate refills), one for requests and one for uploaded poses (counted per pose). An admin
 * may give a key its own steady rates (rounded down to a tier); its burst scales with them. On top, one
 * user's credentials together share a per-user budget, and one organization's poses a per-organization
 * quota, so many keys do not add up to more. Counters live in Redis when configured, so
 * all gateways share a budget. Over budget: 429 `rate_limited` with Retry-After and the IETF draft's
 * `RateLimit` / `RateLimit-Policy` headers. A limiter store failure lets the request through (logged).
 */
export class RateLimits {
  private readonly policies = new Map<string, Policy>();
  /** Aggregates: one user across all their credentials, one organization's poses. Not shown in the headers. */
  private readonly userRequests: Policy;
  private readonly userPoses: Policy;
  private readonly organizationPoses: Policy;

  constructor(
    private readonly backend: LimiterBackend,
    private readonly config: Config,
    private readonly logger?: Logger,
  ) {
    this.userRequests = this.limiterPolicy(
      'requests',
      'user-requests',
      config.RATE_LIMIT_USER_REQUESTS_PER_SECOND,
      2 * config.RATE_LIMIT_USER_REQUESTS_PER_SECOND,
    );
    this.userPoses = this.limiterPolicy(
      'poses',
      'user-poses',
      config.RATE_LIMIT_USER_POSES_PER_SECOND,
      2 * config.RATE_LIMIT_USER_POSES_PER_SECOND,
    );
    this.organizationPoses = this.limiterPolicy(
      'poses',
      'organization-poses',
      config.RATE_LIMIT_ORGANIZATION_POSES_PER_SECOND,
      2 * config.RATE_LIMIT_ORGANIZATION_POSES_PER_SECOND,
    );
  }

  private limiterPolicy(budget: Budget, name: string, perSecond: number, burst: number): Policy {
    const burstSeconds = Math.max(1, Math.ceil(burst / perSecond));
    const steady = this.backend.create({ name: `rate:${name}:${perSecond}`, points: perSecond, durationSeconds: 1 });
    const limiter =
      burst > 0
        ? new BurstyRateLimiter(
            steady,
            this.backend.create({ name: `rate:${name}-burst:${perSecond}:${burst}`, points: burst, durationSeconds: burstSeconds }),
          )
        : steady;
    return { budget, perSecond, burst, burstSeconds, limiter };
  }

  /** The credential's policy: the deployment's, or the key's own rate (rounded to its tier, so the map stays small). */
  private policy(budget: Budget, override: number | null | undefined): Policy {
    const perSecondDefault = budget === 'requests' ? this.config.RATE_LIMIT_REQUESTS_PER_SECOND : this.config.RATE_LIMIT_POSES_PER_SECOND;
    const burstDefault = budget === 'requests' ? this.config.RATE_LIMIT_BURST : this.config.RATE_LIMIT_POSES_BURST;
    const perSecond = override == null ? perSecondDefault : rateTier(override);
    const id = `${budget}:${perSecond}`;
    let policy = this.policies.get(id);
    if (policy) return policy;
    policy = this.limiterPolicy(budget, budget, perSecond, Math.round((burstDefault * perSecond) / perSecondDefault));
    this.policies.set(id, policy);
    return policy;
  }

  /** Distinct credential policies held (bounded by the rate tiers); for tests. */
  get policyCount(): number {
    return this.policies.size;
  }

  /**
   * Counts `requests` requests and `poses` uploaded poses against the caller's budgets. Returns the
   * RateLimit headers of the budgets counted; throws 429 when one is spent.
   */
  async consume(
    principal: Principal,
    { requests = 1, poses = 0 }: { requests?: number; poses?: number } = {},
  ): Promise<Record<string, string>> {
    const key = budgetKey(principal);
    const spend: [Policy, string, number][] = [];
    if (requests > 0) spend.push([this.policy('requests', principal.limits?.requestsPerSecond), key, requests]);
    if (poses > 0) spend.push([this.policy('poses', principal.limits?.posesPerSecond), key, poses]);
    const shown = spend.length;
    if (requests > 0) spend.push([this.userRequests, principal.userId, requests]);
    if (poses > 0) spend.push([this.userPoses, principal.userId, poses], [this.organizationPoses, principal.organizationId, poses]);
    const results = await Promise.all(
      spend.map(([policy, holder, points], index) =>
        policy.limiter.consume(holder, points).then(
          (res) => ({ policy, res, ok: true, shown: index < shown }),
          (reason: unknown) => {
            if (reason instanceof RateLimiterRes) return { policy, res: reason, ok: false, shown: index < shown };
            this.logger?.warn({ err: reason }, 'rate limiter unavailable; request let through');
            return undefined;
          },
        ),
      ),
    );
    const all = results.filter((result) => result !== undefined);
    const counted = all.filter((result) => result.shown);
    const headers: Record<string, string> =
      counted.length === 0
        ? {}
        : {
            'ratelimit-policy': counted
              .map(
                ({ policy }) =>
                  `"${policy.budget}";q=${policy.perSecond};w=1${policy.burst > 0 ? `, "${policy.budget}-burst";q=${policy.burst};w=${policy.burstSeconds}` : ''}`,
              )
              .join(', '),
            ratelimit: counted
              .map(
                ({ policy, res }) =>
                  `"${policy.budget}";r=${Math.max(0, res.remainingPoints)};t=${Math.max(0, Math.ceil(res.msBeforeNext / 1000))}`,
              )
              .join(', '),
          };
    const refused = all.filter((result) => !result.ok);
    if (refused.length > 0) {
      const waitMs = Math.max(...refused.map(({ res }) => res.msBeforeNext));
      const what = refused.map(({ policy, shown }) =>
        shown ? policy.budget : policy === this.organizationPoses ? "the organization's poses" : `this user's ${policy.budget}`,
      );
      throw rateLimited(`Rate limit exceeded (${what.join(', ')}); retry later`, waitMs, headers);
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
