import { setTimeout as sleepFor } from 'node:timers/promises';
import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Config } from '../../shared/config.js';
import { type AppError, RateLimitedError, UnavailableError } from '../../shared/errors.js';
import { addressBucket } from '../http/client-address.js';
import type { LimiterBackend } from './limiter-backend.js';

/** 429 `rate_limited` with a Retry-After of whole seconds (at least 1). */
export function rateLimited(message: string, msBeforeNext: number, headers: Record<string, string> = {}): AppError {
  return new RateLimitedError(message, { 'retry-after': String(Math.max(1, Math.ceil(msBeforeNext / 1000))), ...headers });
}

/** The first delay past the per-account budget; each further failure doubles it, up to LOGIN_THROTTLE_MAX_DELAY_MS. */
const FIRST_DELAY_MS = 250;
/** How long an address an account signed in from stays "known" to it (under the 24.8 days a timer can hold, which the in-memory limiter uses). */
const KNOWN_ADDRESS_SECONDS = 14 * 24 * 3600;
/** The account counter never refuses: its count only sets the delay. */
const UNBOUNDED = 1_000_000_000;

/**
 * Password sign-in throttle. Every attempt is counted *before* the password hash is checked, by atomic
 * increments, so N parallel guesses cost N attempts. Over LOGIN_THROTTLE_WINDOW_SECONDS, with an address
 * counted per IPv6 /64:
 * - one account from one address (strict, 429): stops a guesser without touching the owner elsewhere;
 * - one address over every account (429): a guesser spraying many accounts;
 * - one account from every address: never refused, since anyone with a few addresses could then lock any
 *   account out; past its budget each attempt waits, doubling per failure up to LOGIN_THROTTLE_MAX_DELAY_MS,
 *   which slows a distributed guesser and still lets the owner in.
 * A successful sign-in gives its attempt back and clears its account+address count; from an address the
 * account signed in from before, it also clears the account's failures.
 */
export class LoginThrottle {
  private readonly accountAddress: RateLimiterAbstract;
  private readonly account: RateLimiterAbstract;
  private readonly address: RateLimiterAbstract;
  private readonly known: RateLimiterAbstract;
  private readonly accountBudget: number;
  private readonly maxDelayMs: number;

  constructor(
    backend: LimiterBackend,
    config: Config,
    private readonly sleep: (ms: number) => Promise<unknown> = sleepFor,
  ) {
    const durationSeconds = config.LOGIN_THROTTLE_WINDOW_SECONDS;
    this.accountAddress = backend.create({ name: 'login:account-address', points: config.LOGIN_THROTTLE_MAX_FAILURES, durationSeconds });
    this.account = backend.create({ name: 'login:account', points: UNBOUNDED, durationSeconds });
    this.address = backend.create({ name: 'login:address', points: config.LOGIN_THROTTLE_MAX_FAILURES_PER_ADDRESS, durationSeconds });
    this.known = backend.create({ name: 'login:known', points: UNBOUNDED, durationSeconds: KNOWN_ADDRESS_SECONDS });
    this.accountBudget = config.LOGIN_THROTTLE_MAX_FAILURES_PER_ACCOUNT;
    this.maxDelayMs = config.LOGIN_THROTTLE_MAX_DELAY_MS;
  }

  /** The wait before checking the password of an account that has had `attempts` attempts in the window. */
  delayFor(attempts: number): number {
    const over = attempts - this.accountBudget;
    if (over <= 0) return 0;
    return Math.min(this.maxDelayMs, FIRST_DELAY_MS * 2 ** Math.min(over - 1, 30));
  }

  /**
   * Counts one attempt of `email` from `address`; throws 429 when its address budgets are spent, and waits
   * when the account's is. The returned function is called once the password proved right.
   */
  async attempt(email: string, address: string): Promise<() => Promise<void>> {
    const bucket = addressBucket(address);
    const accountAddressKey = `${email}|${bucket}`;
    const results = await Promise.allSettled([
      this.accountAddress.consume(accountAddressKey),
      this.address.consume(bucket),
      this.account.consume(email),
    ]);
    let waitMs = 0;
    for (const result of results) {
      if (result.status === 'fulfilled') continue;
      if (!(result.reason instanceof RateLimiterRes)) throw new UnavailableError('The sign-in throttle is unavailable; try again shortly');
      waitMs = Math.max(waitMs, result.reason.msBeforeNext);
    }
    if (waitMs > 0) throw rateLimited('Too many failed sign-in attempts; try again later', waitMs);
    const delay = this.delayFor((results[2] as PromiseFulfilledResult<RateLimiterRes>).value.consumedPoints);
    if (delay > 0) await this.sleep(delay);
    return async () => {
      const known = (await this.known.get(accountAddressKey)) !== null;
      await Promise.all([
        this.accountAddress.delete(accountAddressKey),
        this.address.reward(bucket),
        known ? this.account.delete(email) : this.account.reward(email),
        this.known.set(accountAddressKey, 1, KNOWN_ADDRESS_SECONDS),
      ]);
    };
  }
}
