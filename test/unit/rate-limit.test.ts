import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLimiterBackend } from '../../gateway/auth/limiter-backend.js';
import type { Principal } from '../../gateway/auth/principal.js';
import { RateLimits, rateTier } from '../../gateway/http/rate-limit.js';
import { loadConfig } from '../../shared/config.js';
import { type AppError, ErrorCode } from '../../shared/errors.js';

const user: Principal = {
  userId: 'u1',
  email: 'u@x.test',
  organizationId: 'o1',
  role: 'user',
  platformAdmin: false,
  permission: 'read-write',
  via: 'jwt',
};

function limits(env: Record<string, string>) {
  return new RateLimits(createLimiterBackend(loadConfig(env)), loadConfig(env));
}
const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: AppError) => error,
  );

/** The budgets' arithmetic on the in-memory counters, with a fake clock (Redis is covered by the integration suite). */
describe('per-credential rate limits (memory, fake clock)', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'], now: Date.UTC(2026, 0, 1) }));
  afterEach(() => vi.useRealTimers());

  it('allows the steady rate in a second, refuses the next with Retry-After, and refills after the second', async () => {
    const subject = limits({ RATE_LIMIT_REQUESTS_PER_SECOND: '3', RATE_LIMIT_BURST: '0' });
    for (let i = 0; i < 3; i++) await subject.consume(user);
    const error = (await refusal(subject.consume(user)))!;
    expect(error.code).toBe(ErrorCode.RateLimited);
    expect(error.headers).toMatchObject({ 'retry-after': '1', ratelimit: '"requests";r=0;t=1', 'ratelimit-policy': '"requests";q=3;w=1' });
    vi.advanceTimersByTime(1000);
    await expect(subject.consume(user)).resolves.toEqual({ ratelimit: '"requests";r=2;t=1', 'ratelimit-policy': '"requests";q=3;w=1' });
  });

  it('lets a burst through on top of the steady rate, then only the steady rate until the burst refills', async () => {
    const subject = limits({ RATE_LIMIT_REQUESTS_PER_SECOND: '2', RATE_LIMIT_BURST: '4' });
    for (let i = 0; i < 6; i++) await subject.consume(user);
    expect((await refusal(subject.consume(user)))?.code).toBe(ErrorCode.RateLimited);
    vi.advanceTimersByTime(1000); // the steady second renews, the burst (2 s to refill at 2/s) does not
    for (let i = 0; i < 2; i++) await subject.consume(user);
    expect((await refusal(subject.consume(user)))?.code).toBe(ErrorCode.RateLimited);
    vi.advanceTimersByTime(1000);
    for (let i = 0; i < 6; i++) await subject.consume(user);
  });

  it('keeps a budget per credential: each API key its own, apart from its user’s', async () => {
    const subject = limits({ RATE_LIMIT_REQUESTS_PER_SECOND: '1', RATE_LIMIT_BURST: '0' });
    await subject.consume(user);
    await subject.consume({ ...user, apiKeyId: 'k1' });
    await subject.consume({ ...user, apiKeyId: 'k2' });
    expect((await refusal(subject.consume({ ...user, apiKeyId: 'k1' })))?.code).toBe(ErrorCode.RateLimited);
  });

  it('honours a key’s own limits and counts poses one by one', async () => {
    const subject = limits({
      RATE_LIMIT_REQUESTS_PER_SECOND: '100',
      RATE_LIMIT_BURST: '0',
      RATE_LIMIT_POSES_PER_SECOND: '10',
      RATE_LIMIT_POSES_BURST: '0',
    });
    const key = { ...user, apiKeyId: 'k3', limits: { requestsPerSecond: 1, posesPerSecond: 50 } };
    await expect(subject.consume(key, { poses: 40 })).resolves.toMatchObject({
      'ratelimit-policy': '"requests";q=1;w=1, "poses";q=50;w=1',
    });
    expect((await refusal(subject.consume(key, { requests: 0, poses: 11 })))?.message).toMatch(/poses/);
    expect((await refusal(subject.consume(key)))?.message).toMatch(/requests/);
    expect((await refusal(subject.consume(user, { requests: 0, poses: 11 })))?.code).toBe(ErrorCode.RateLimited);
  });

  it('adds up all of one user’s keys and tokens against the per-user budget (issue 28 item 2)', async () => {
    const subject = limits({ RATE_LIMIT_REQUESTS_PER_SECOND: '3', RATE_LIMIT_BURST: '0', RATE_LIMIT_USER_REQUESTS_PER_SECOND: '2' });
    // The user's budget is 2 a second plus a burst of 4: six requests spread over three credentials, then no more.
    for (const apiKeyId of ['a', 'b', undefined, 'a', 'b', undefined]) await subject.consume({ ...user, apiKeyId });
    const refused = await refusal(subject.consume({ ...user, apiKeyId: 'c' }));
    expect(refused?.code).toBe(ErrorCode.RateLimited);
    expect(refused?.message).toMatch(/this user's requests/);
    // Another user is untouched.
    await expect(subject.consume({ ...user, userId: 'u2', apiKeyId: 'd' })).resolves.toBeDefined();
  });

  it('caps one organization’s poses across its users (issue 28 item 2)', async () => {
    const subject = limits({ RATE_LIMIT_POSES_BURST: '0', RATE_LIMIT_ORGANIZATION_POSES_PER_SECOND: '5' });
    await subject.consume({ ...user, userId: 'p1' }, { requests: 0, poses: 6 });
    await subject.consume({ ...user, userId: 'p2' }, { requests: 0, poses: 4 });
    expect((await refusal(subject.consume({ ...user, userId: 'p3' }, { requests: 0, poses: 1 })))?.message).toMatch(/organization's poses/);
    await expect(subject.consume({ ...user, userId: 'p4', organizationId: 'o2' }, { requests: 0, poses: 1 })).resolves.toBeDefined();
  });

  it('keeps a few limiters per decade whatever rates keys carry, rounding each down (issue 28 item 2)', async () => {
    const subject = limits({});
    for (let rate = 1; rate <= 1000; rate += 1)
      await subject.consume({ ...user, userId: `u${rate}`, apiKeyId: `k${rate}`, limits: { requestsPerSecond: rate } });
    expect(subject.policyCount).toBeLessThanOrEqual(10);
    expect(rateTier(999)).toBe(500);
    expect(rateTier(200)).toBe(200);
    expect(rateTier(7)).toBe(5);
    expect(rateTier(1)).toBe(1);
    await expect(subject.consume({ ...user, apiKeyId: 'k-tier', limits: { requestsPerSecond: 37 } })).resolves.toMatchObject({
      'ratelimit-policy': expect.stringMatching(/^"requests";q=20;w=1/),
    });
  });
});

describe('default budgets (issue 28 item 2)', () => {
  it('give one key a small share of one gateway, and bound what an admin may grant', () => {
    const config = loadConfig({});
    expect(config.RATE_LIMIT_REQUESTS_PER_SECOND).toBe(100);
    expect(config.RATE_LIMIT_BURST).toBe(200);
    expect(config.RATE_LIMIT_POSES_PER_SECOND).toBe(2000);
    expect(config.RATE_LIMIT_USER_REQUESTS_PER_SECOND).toBe(200);
    expect(config.RATE_LIMIT_ORGANIZATION_POSES_PER_SECOND).toBe(20_000);
    expect(config.RATE_LIMIT_MAX_REQUESTS_PER_SECOND).toBe(1000);
    expect(config.MAX_API_KEYS_PER_USER).toBe(20);
  });
});
