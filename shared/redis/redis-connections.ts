import { Cluster, Redis } from 'ioredis';
import type { Config } from '../config.js';

/** A connection to one Redis, or to a Redis Cluster (ioredis routes each command to the node of its slot). */
export type RedisClient = Redis | Cluster;

/** Where Redis is: one server (REDIS_URL), or a Redis Cluster known by some of its nodes (REDIS_CLUSTER_NODES). */
export type RedisTarget = { url: string } | { clusterNodes: readonly { host: string; port: number }[] };

export interface ConnectionOptions {
  /** CLIENT SETNAME, so an operator can tell Floorcast's connections apart (on a cluster, on every node). */
  name: string;
  /** `null` for BullMQ's blocking connections, which must never give up. */
  maxRetriesPerRequest: number | null;
  enableOfflineQueue?: boolean;
  /** The commands of one tick go in one write (one per node on a cluster). */
  enableAutoPipelining?: boolean;
  /**
   * A connection that subscribes (SUBSCRIBE, or SSUBSCRIBE on a cluster, with one subscriber connection per master):
   * its subscriptions wait for Redis rather than being refused while it is away, and come back with it.
   */
  subscriber?: boolean;
  /**
   * On one Redis, a command that may give up still waits for it while it is away, until its retries are spent
   * (a few reconnect attempts): for messages worth delivering late rather than not at all (the bus's publisher).
   * Not on a cluster, where ioredis would keep it however long the whole cluster is away.
   */
  queueWhileAway?: boolean;
}

/**
 * Reconnect attempts while Redis is away: 50 ms more each time, at most a second apart, so the gateway is back
 * within a second of Redis (ioredis' default waits up to two).
 */
const reconnectDelay = (attempt: number) => Math.min(attempt * 50, 1000);

/**
 * The one place Redis connections are made, for every driver (bus, shard streams and leases, jobs, limits): a
 * client or a cluster client, from the same options. On a cluster, a multi-key command, a transaction or a Lua
 * script may only touch keys of one slot: `slotGroup` names the keys that must stay together.
 *
 * A command that may give up (maxRetriesPerRequest set, not a subscription, not `queueWhileAway`) waits for Redis
 * only until the connection is first ready, and is refused at once afterwards while Redis is away. Left in
 * ioredis' offline queue it would wait for the reconnect attempt that flushes the queue (every
 * maxRetriesPerRequest + 1 attempts, seconds apart in a long outage): an upload's shard append and rate limits
 * (and its live publish, see Bus.publish's `live`) waiting in turn held it past the HTTP idle timeout, and
 * uWebSockets.js closed its connection with no answer (test/fault/redis-fail-fast.test.ts).
 */
export class RedisConnections {
  constructor(readonly target: RedisTarget) {}

  get clustered(): boolean {
    return 'clusterNodes' in this.target;
  }

  connect(options: ConnectionOptions): RedisClient {
    const { name, maxRetriesPerRequest, enableOfflineQueue = true, enableAutoPipelining = false, subscriber = false } = options;
    const givesUp = maxRetriesPerRequest !== null && enableOfflineQueue && !subscriber;
    if ('url' in this.target) {
      const client = new Redis(this.target.url, {
        connectionName: name,
        maxRetriesPerRequest,
        enableOfflineQueue,
        enableAutoPipelining,
        retryStrategy: reconnectDelay,
      });
      if (givesUp && !options.queueWhileAway) client.once('ready', () => void (client.options.enableOfflineQueue = false));
      return client;
    }
    const cluster = new Cluster([...this.target.clusterNodes], {
      redisOptions: { connectionName: name, maxRetriesPerRequest },
      enableOfflineQueue,
      enableAutoPipelining,
      shardedSubscribers: subscriber,
    });
    // The same on a cluster, where ioredis would otherwise keep the commands queued however long the whole cluster
    // is away. Not a sharded subscriber's: its SSUBSCRIBE waits for the node's subscriber connection, which ioredis
    // rebuilds apart from the cluster's readiness (refused, a subscription would be lost).
    if (givesUp) cluster.once('ready', () => void (cluster.options.enableOfflineQueue = false));
    return cluster;
  }

  /**
   * `name` as the hash tag of the keys built on it: `{name}` on a cluster, so they share a slot, and `name`
   * itself on one Redis, where the keys keep the names they had before clusters (a rolling upgrade finds them).
   */
  slotGroup(name: string): string {
    return this.clustered ? `{${name}}` : name;
  }
}

/** Redis as configured: a cluster (REDIS_CLUSTER_NODES), one server (REDIS_URL), or none (the in-process drivers). */
export function redisConnections(config: Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES'>): RedisConnections | undefined {
  if (config.REDIS_CLUSTER_NODES) return new RedisConnections({ clusterNodes: config.REDIS_CLUSTER_NODES });
  if (config.REDIS_URL) return new RedisConnections({ url: config.REDIS_URL });
  return undefined;
}
