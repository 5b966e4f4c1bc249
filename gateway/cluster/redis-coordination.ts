import type { RedisClient, RedisConnections } from '../../shared/redis/redis-connections.js';
import { ClusterKeys } from './cluster-keys.js';
import type { Coordination } from './coordination.js';

/** Takes the lease when free, or extends it when already ours. */
const ACQUIRE = `
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not holder then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0`;
/** Extends the lease if it is still ours. */
const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
return 0`;
/** Deletes the lease only if it is still ours (it may have expired and been taken meanwhile). */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/**
 * Membership and leases in Redis (keys: cluster-keys.ts). A member is alive while its key `member:<id>`
 * exists (SET PX, refreshed by each heartbeat); `members` (a sorted set) only lists who may be, and whoever
 * lists them drops the ones whose key has expired. A shard's lease holds the owner's id, with a TTL the owner
 * renews: nobody else can take it before it expires or is released. Redis's own expiry decides, so the members'
 * clocks need not agree. Each script touches one lease (on a Redis Cluster, leases live on their shards' nodes).
 */
export class RedisCoordination implements Coordination {
  private readonly redis: RedisClient;
  private readonly keys: ClusterKeys;

  constructor(
    redis: RedisConnections,
    prefix: string,
    readonly memberId: string,
    private readonly ttlMs: number,
  ) {
    this.keys = new ClusterKeys(redis, prefix);
    // Auto-pipelined: a renewal's one script per lease goes in one write (per node).
    this.redis = redis.connect({ name: `floorcast-cluster-${memberId}`, maxRetriesPerRequest: 1, enableAutoPipelining: true });
    this.redis.on('error', () => undefined); // reported by the heartbeat's rejection
  }

  async heartbeat(): Promise<string[]> {
    const [, , listed] = (await this.redis
      .multi()
      .set(this.keys.member(this.memberId), this.memberId, 'PX', this.ttlMs)
      .zadd(this.keys.members, String(Date.now()), this.memberId)
      .zrange(this.keys.members, '0', '-1')
      .exec())!.map(([error, value]) => {
      if (error) throw error;
      return value;
    }) as [unknown, unknown, string[]];
    const alive = await this.redis.mget(...listed.map((member) => this.keys.member(member)));
    const dead = listed.filter((_, index) => alive[index] === null);
    if (dead.length > 0) await this.redis.zrem(this.keys.members, ...dead);
    return listed.filter((_, index) => alive[index] !== null).sort();
  }

  async acquire(shard: number): Promise<boolean> {
    return (await this.redis.eval(ACQUIRE, 1, this.keys.lease(shard), this.memberId, this.ttlMs)) === 1;
  }

  async renew(shards: readonly number[]): Promise<boolean[]> {
    const held = await Promise.all(shards.map((shard) => this.redis.eval(RENEW, 1, this.keys.lease(shard), this.memberId, this.ttlMs)));
    return held.map((value) => value === 1);
  }

  async release(shard: number): Promise<void> {
    await this.redis.eval(RELEASE, 1, this.keys.lease(shard), this.memberId);
  }

  async leave(): Promise<void> {
    await this.redis.multi().del(this.keys.member(this.memberId)).zrem(this.keys.members, this.memberId).exec();
  }

  async close(): Promise<void> {
    await Promise.race([this.redis.quit().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
    this.redis.disconnect();
  }
}
