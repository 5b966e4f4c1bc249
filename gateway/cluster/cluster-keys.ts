import type { RedisConnections } from '../../shared/redis/redis-connections.js';

/**
 * The Redis keys of the cluster coordination and the shard streams, in one place because two drivers share a
 * layout: on a Redis Cluster, a shard's stream, its per-organization counts (kept with the stream in one
 * transaction) and its lease share the shard's hash tag, so they live on one node; the membership keys (read
 * together by MGET) share another. On one Redis the names are those from before clusters (`slotGroup`).
 *
 *   one Redis                           Redis Cluster
 *   <p>:cluster:shard:<n>               {<p>:cluster:shard:<n>}
 *   <p>:cluster:shard:<n>:organizations {<p>:cluster:shard:<n>}:organizations
 *   <p>:cluster:lease:<n>               {<p>:cluster:shard:<n>}:lease
 *   <p>:cluster:members                 {<p>:cluster}:members
 *   <p>:cluster:member:<id>             {<p>:cluster}:member:<id>
 */
export class ClusterKeys {
  private readonly base: string;
  private readonly membership: string;

  constructor(
    private readonly redis: RedisConnections,
    prefix: string,
  ) {
    this.base = `${prefix}:cluster`;
    this.membership = redis.slotGroup(this.base);
  }

  shard(shard: number): string {
    return this.redis.slotGroup(`${this.base}:shard:${shard}`);
  }

  /** Unacknowledged entries per organization (a hash), with the stream. */
  shardCounts(shard: number): string {
    return `${this.shard(shard)}:organizations`;
  }

  /** On a cluster only: a message here says the shard's stream has new entries (SPUBLISH, in the append's transaction). */
  shardAppended(shard: number): string {
    return `${this.shard(shard)}:appended`;
  }

  lease(shard: number): string {
    return this.redis.clustered ? `${this.shard(shard)}:lease` : `${this.base}:lease:${shard}`;
  }

  get members(): string {
    return `${this.membership}:members`;
  }

  member(id: string): string {
    return `${this.membership}:member:${id}`;
  }
}
