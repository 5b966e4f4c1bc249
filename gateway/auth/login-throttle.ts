import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Config } from '../../shared/config.js';
import { AppError, ErrorCode } from '../../shared/errors.js';
import type { LimiterBackend } from './limiter-backend.js';

/** 429 `rate_limited` with a Retry-After of whole seconds (at least 1). */
export function rateLimited(message: string, msBeforeNext: number, headers: Record<string, string> = {}): AppError {
  return new AppError(ErrorCode.RateLimited, message, undefined, { 'retry-after': String(Math.max(1, Math.ceil(msBeforeNext / 1000))), ...headers });
}

/**
 * Password sign-in throttle. Every attempt is counted *before* the password hash is checked, by atomic
 * increments, so N parallel guesses cost N attempts. Three budgets over LOGIN_THROTTLE_WINDOW_SECONDS:
 * - one account from one address (strict): what stops a guesser without locking the owner out elsewhere;
 * - one account from every address (looser): a distributed guesser is still bounded;
 * - one address over every account: a guesser spraying many accounts.
 * A successful sign-in gives its attempt back (consume, then reward) and clears its account+address count.
 */
export class LoginThrottle {
  private readonly accountAddress: RateLimiterAbstract;
  private readonly account: RateLimiterAbstract;
  private readonly address: RateLimiterAbstract;

  constructor(backend: LimiterBackend, config: Config) {
    const durationSeconds = config.LOGIN_THROTTLE_WINDOW_SECONDS;
    this.accountAddress = backend.create({ name: 'login:account-address', points: config.LOGIN_THROTTLE_MAX_FAILURES, durationSeconds });
    this.account = backend.create({ name: 'login:account', points: config.LOGIN_THROTTLE_MAX_FAILURES_PER_ACCOUNT, durationSeconds });
    this.address = backend.create({ name: 'login:address', points: config.LOGIN_THROTTLE_MAX_FAILURES_PER_ADDRESS, durationSeconds });
  }

  /**
   * Counts one attempt of `email` from `address`; throws 429 when any budget is spent. The returned function
   * is called once the password proved right.
   */
  async attempt(email: string, address: string): Promise<() => Promise<void>> {
    const accountAddressKey = `${email}|${address}`;
    const results = await Promise.allSettled([
      this.accountAddress.consume(accountAddressKey),
      this.account.consume(email),
      this.address.consume(address),
    ]);
    let waitMs = 0;
    for (const result of results) {
      if (result.status === 'fulfilled') continue;
      if (!(result.reason instanceof RateLimiterRes)) throw new AppError(ErrorCode.Unavailable, 'The sign-in throttle is unavailable; try again shortly');
      waitMs = Math.max(waitMs, result.reason.msBeforeNext);
    }
    if (waitMs > 0) throw rateLimited('Too many failed sign-in attempts; try again later', waitMs);
    return async () => {
      await Promise.all([this.accountAddress.delete(accountAddressKey), this.account.reward(email), this.address.reward(address)]);
    };
  }
}
