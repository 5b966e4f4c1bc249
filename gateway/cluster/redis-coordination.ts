import { Redis } from 'ioredis';
import type { Coordination } from './coordination.js';

/** Takes the lease when free, or extends it when already ours. */
const ACQUIRE = `
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not holder then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0`;
/** Extends each lease still ours; one answer per key. */
const RENEW = `
local held = {}
for index, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then redis.call('PEXPIRE', key, ARGV[2]) held[index] = 1 else held[index] = 0 end
end
return held`;
/** Deletes the lease only if it is still ours (it may have expired and been taken meanwhile). */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/**
 * Membership and leases in Redis, under `<prefix>:cluster:`. A member is alive while its key
 * `member:<id>` exists (SET PX, refreshed by each heartbeat); `members` (a sorted set) only lists who may be,
 * and whoever lists them drops the ones whose key has expired. A shard's lease is `lease:<n>` holding the
 * owner's id, with a TTL the owner renews: nobody else can take it before it expires or is released.
 * Redis's own expiry decides, so the members' clocks need not agree.
 */
export class RedisCoordination implements Coordination {
  private readonly redis: Redis;
  private readonly prefix: string;

  constructor(
    url: string,
    prefix: string,
    readonly memberId: string,
    private readonly ttlMs: number,
  ) {
    this.prefix = `${prefix}:cluster:`;
    this.redis = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: true, connectionName: `floorcast-cluster-${memberId}` });
    this.redis.on('error', () => undefined); // reported by the heartbeat's rejection
  }

  private memberKey(member: string): string {
    return `${this.prefix}member:${member}`;
  }

  private leaseKey(shard: number): string {
    return `${this.prefix}lease:${shard}`;
  }

  async heartbeat(): Promise<string[]> {
    const [, , listed] = (await this.redis
      .multi()
      .set(this.memberKey(this.memberId), this.memberId, 'PX', this.ttlMs)
      .zadd(`${this.prefix}members`, String(Date.now()), this.memberId)
      .zrange(`${this.prefix}members`, '0', '-1')
      .exec())!.map(([error, value]) => {
      if (error) throw error;
      return value;
    }) as [unknown, unknown, string[]];
    const alive = await this.redis.mget(...listed.map((member) => this.memberKey(member)));
    const dead = listed.filter((_, index) => alive[index] === null);
    if (dead.length > 0) await this.redis.zrem(`${this.prefix}members`, ...dead);
    return listed.filter((_, index) => alive[index] !== null).sort();
  }

  async acquire(shard: number): Promise<boolean> {
    return (await this.redis.eval(ACQUIRE, 1, this.leaseKey(shard), this.memberId, this.ttlMs)) === 1;
  }

  async renew(shards: readonly number[]): Promise<boolean[]> {
    if (shards.length === 0) return [];
    const held = (await this.redis.eval(
      RENEW,
      shards.length,
      ...shards.map((shard) => this.leaseKey(shard)),
      this.memberId,
      this.ttlMs,
    )) as number[];
    return held.map((value) => value === 1);
  }

  async release(shard: number): Promise<void> {
    await this.redis.eval(RELEASE, 1, this.leaseKey(shard), this.memberId);
  }

  async leave(): Promise<void> {
    await this.redis.multi().del(this.memberKey(this.memberId)).zrem(`${this.prefix}members`, this.memberId).exec();
  }

  async close(): Promise<void> {
    await Promise.race([this.redis.quit().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
    this.redis.disconnect();
  }
}
