import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisShardLog } from '../../gateway/cluster/redis-shard-log.js';
import { createLimiterBackend } from '../../gateway/auth/limiter-backend.js';
import { loadConfig } from '../../shared/config.js';
import { EncodedPayload } from '../../shared/bus/encoded-payload.js';
import { RedisBus } from '../../shared/bus/redis-bus.js';
import { PositionsMessage } from '../../shared/positions/positions-message.js';
import { RedisConnections } from '../../shared/redis/redis-connections.js';
import { FaultRedis, faultServersAvailable, faultServersSkipReason, sleep } from '../../testkit/fault-servers.js';
import { positionRecord } from '../../testkit/positions.js';

/**
 * The calls an upload makes to Redis on its way to a 204 (live publish, shard-log append, rate limits) are refused
 * at once while Redis is away, so the upload falls back (the outage buffer, no live push, let through) instead of
 * waiting in ioredis' offline queue for a reconnect attempt that flushes it: those waits add up, and an upload
 * held past uWebSockets.js' 10 s idle timeout has its connection closed under it (seen in test/fault/redis-outage).
 * Each call is made a few seconds into the outage, when ioredis' reconnect attempts are seconds apart, and must
 * have settled (refused) after a few event-loop turns, long before the next attempt could have flushed it.
 */
if (!faultServersAvailable) console.warn(faultServersSkipReason);

/** Settled within a few event-loop turns: 'rejected', 'resolved', or 'pending' if it is still waiting. */
async function settledSoon(promise: Promise<unknown>): Promise<'resolved' | 'rejected' | 'pending'> {
  let state: 'resolved' | 'rejected' | 'pending' = 'pending';
  promise.then(
    () => (state = 'resolved'),
    () => (state = 'rejected'),
  );
  for (let turn = 0; turn < 5 && state === 'pending'; turn++) await new Promise((resolve) => setImmediate(resolve));
  await sleep(20);
  return state;
}

const onePosition = () =>
  new EncodedPayload(new PositionsMessage('org-1', [positionRecord({ organizationId: 'org-1', timestamp: Date.now() })]));

describe.skipIf(!faultServersAvailable)('Redis calls on the upload path while Redis is away (private server)', () => {
  let redis: FaultRedis;
  let bus: RedisBus;
  let log: RedisShardLog;
  let limits: ReturnType<typeof createLimiterBackend>;

  beforeAll(async () => {
    redis = await FaultRedis.start();
    const connections = new RedisConnections({ url: redis.url });
    bus = new RedisBus(connections, 'failfast');
    log = new RedisShardLog(connections, 'failfast', 'member-1');
    limits = createLimiterBackend(loadConfig({ REDIS_URL: redis.url, REDIS_PREFIX: 'failfast' }));
    // Each works while Redis is up.
    await bus.ping();
    await log.append(1, onePosition());
    await limits.create({ name: 'failfast', points: 10, durationSeconds: 1 }).consume('key');
    await redis.stop();
    await sleep(4000); // several reconnect attempts: ioredis now waits seconds between them
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled([bus?.close(), log?.close(), limits?.close()]);
    await redis?.destroy();
  });

  it('a live bus publish (positions) is refused at once', async () => {
    expect(await settledSoon(bus.publish('positions:1', { id: 1 }, { live: true }))).toBe('rejected');
  });

  it('a shard-log append is refused at once (the positions go to the outage buffer)', async () => {
    expect(await settledSoon(log.append(1, onePosition()))).toBe('rejected');
  });

  it('a rate-limit check is refused at once (the request is let through)', async () => {
    expect(await settledSoon(limits.create({ name: 'failfast', points: 10, durationSeconds: 1 }).consume('key'))).toBe('rejected');
  });
});
