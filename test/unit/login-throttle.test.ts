import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { createLimiterBackend, type LimiterBackend } from '../../gateway/auth/limiter-backend.js';
import { LoginThrottle } from '../../gateway/auth/login-throttle.js';
import { loadConfig } from '../../shared/config.js';
import { type AppError, ErrorCode } from '../../shared/errors.js';
import { redisClusterOfThisFile } from '../../testkit/redis-cluster.js';
import { deleteRedisPrefix, serverRedisUrl } from '../../testkit/test-environment.js';

const WINDOW_SECONDS = 600;

/**
 * The same suite runs on the in-memory counters, on Redis when REDIS_URL is set, and on a three-master Redis
 * Cluster of this file's own (`seeds`).
 */
const drivers = [
  { kind: 'memory', url: undefined as string | undefined, seeds: () => undefined as string | undefined },
  ...(serverRedisUrl ? [{ kind: 'redis', url: serverRedisUrl, seeds: () => undefined }] : []),
];
const cluster = redisClusterOfThisFile();
if (cluster) drivers.push({ kind: 'redis-cluster', url: undefined, seeds: () => cluster().seeds });

describe.each(drivers)('login throttle ($kind)', ({ kind, url, seeds }) => {
  const prefixes: string[] = [];
  const backends: LimiterBackend[] = [];
  afterEach(() => vi.useRealTimers());
  afterAll(async () => {
    for (const backend of backends) await backend.close();
    if (url) for (const prefix of prefixes) await deleteRedisPrefix(url, prefix);
  });

  const waits: number[] = [];
  function throttle() {
    const prefix = `fctest:throttle:${randomBytes(4).toString('hex')}`;
    prefixes.push(prefix);
    const config = loadConfig({
      REDIS_URL: url,
      REDIS_CLUSTER_NODES: seeds(),
      REDIS_PREFIX: prefix,
      LOGIN_THROTTLE_WINDOW_SECONDS: String(WINDOW_SECONDS),
      LOGIN_THROTTLE_MAX_FAILURES: '3',
      LOGIN_THROTTLE_MAX_FAILURES_PER_ACCOUNT: '5',
      LOGIN_THROTTLE_MAX_FAILURES_PER_ADDRESS: '4',
      LOGIN_THROTTLE_MAX_DELAY_MS: '2000',
    });
    const backend = createLimiterBackend(config);
    backends.push(backend);
    waits.length = 0;
    return { throttle: new LoginThrottle(backend, config, async (ms) => void waits.push(ms)), prefix };
  }
  const refusal = (promise: Promise<unknown>) =>
    promise.then(
      () => undefined,
      (error: AppError) => error,
    );

  it('counts every one of N parallel attempts before any password is checked', async () => {
    const { throttle: subject } = throttle();
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => subject.attempt('victim@x.test', '10.0.0.1')));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as AppError);
    expect(refused).toHaveLength(7);
    for (const error of refused) {
      expect(error.code).toBe(ErrorCode.RateLimited);
      expect(Number(error.headers?.['retry-after'])).toBeGreaterThan(0);
      expect(Number(error.headers?.['retry-after'])).toBeLessThanOrEqual(WINDOW_SECONDS);
    }
  });

  it('locks an account out from the guessing address only; the owner elsewhere still signs in', async () => {
    const { throttle: subject } = throttle();
    for (let i = 0; i < 3; i++) await subject.attempt('owner@x.test', '10.0.0.66');
    expect((await refusal(subject.attempt('owner@x.test', '10.0.0.66')))?.code).toBe(ErrorCode.RateLimited);
    await expect(subject.attempt('owner@x.test', '10.0.0.2')).resolves.toBeTypeOf('function');
  });

  it('never refuses an account across addresses: past its budget each attempt waits longer, up to the ceiling (issue 28 item 4)', async () => {
    const { throttle: subject } = throttle();
    for (let i = 0; i < 5; i++) await subject.attempt('target@x.test', `10.1.0.${i}`);
    expect(waits).toEqual([]);
    for (let i = 5; i < 10; i++) await expect(subject.attempt('target@x.test', `10.1.0.${i}`)).resolves.toBeTypeOf('function');
    expect(waits).toEqual([250, 500, 1000, 2000, 2000]);
  });

  it('counts an IPv6 address per /64 (issue 28 item 4)', async () => {
    const { throttle: subject } = throttle();
    for (let i = 1; i <= 4; i++) await subject.attempt(`spray${i}@x.test`, `2001:db8:1:2::${i.toString(16)}`);
    expect((await refusal(subject.attempt('spray9@x.test', '2001:db8:1:2:ffff::1')))?.code).toBe(ErrorCode.RateLimited);
    await expect(subject.attempt('spray9@x.test', '2001:db8:1:3::1')).resolves.toBeTypeOf('function');
  });

  it('a sign-in from an address the account used before clears its failures; from a new one it does not (issue 28 item 4)', async () => {
    const { throttle: subject } = throttle();
    await (await subject.attempt('known@x.test', '10.6.0.1'))();
    for (let i = 0; i < 6; i++) await subject.attempt('known@x.test', `10.6.1.${i}`);
    waits.length = 0;
    await (await subject.attempt('known@x.test', '10.6.2.1'))(); // new address: waits, clears nothing
    await subject.attempt('known@x.test', '10.6.3.1');
    expect(waits).toHaveLength(2);
    await (await subject.attempt('known@x.test', '10.6.0.1'))(); // known address: clears the account's count
    waits.length = 0;
    await subject.attempt('known@x.test', '10.6.4.1');
    expect(waits).toEqual([]);
  });

  it('limits one address spraying many accounts', async () => {
    const { throttle: subject } = throttle();
    for (let i = 0; i < 4; i++) await subject.attempt(`user${i}@x.test`, '10.2.0.1');
    expect((await refusal(subject.attempt('user9@x.test', '10.2.0.1')))?.code).toBe(ErrorCode.RateLimited);
    await expect(subject.attempt('user9@x.test', '10.2.0.2')).resolves.toBeTypeOf('function');
  });

  it('gives a successful attempt back and clears its account+address count', async () => {
    const { throttle: subject } = throttle();
    await subject.attempt('me@x.test', '10.3.0.1');
    await subject.attempt('me@x.test', '10.3.0.1');
    const succeeded = await subject.attempt('me@x.test', '10.3.0.1');
    await succeeded();
    // Without the clearing, 3 + 2 attempts would pass the account+address budget of 3.
    for (let i = 0; i < 2; i++) await subject.attempt('me@x.test', '10.3.0.1');
  });

  it.runIf(kind === 'memory')('forgets an entry once the window has passed (memory)', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    const { throttle: subject } = throttle();
    for (let i = 0; i < 3; i++) await subject.attempt('later@x.test', '10.4.0.1');
    expect((await refusal(subject.attempt('later@x.test', '10.4.0.1')))?.code).toBe(ErrorCode.RateLimited);
    vi.advanceTimersByTime(WINDOW_SECONDS * 1000 + 1);
    await expect(subject.attempt('later@x.test', '10.4.0.1')).resolves.toBeTypeOf('function');
  });

  it.runIf(url)('stores every counter under the deployment prefix with an expiry (redis)', async () => {
    const { throttle: subject, prefix } = throttle();
    await subject.attempt('ttl@x.test', '10.5.0.1');
    const redis = new Redis(url!);
    try {
      const keys = await redis.keys(`${prefix}:*`);
      expect(keys).toHaveLength(3);
      for (const key of keys) {
        const ttl = await redis.ttl(key);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(WINDOW_SECONDS);
      }
    } finally {
      redis.disconnect();
    }
  });
});
