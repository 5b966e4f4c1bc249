import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Config } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import { redisConnections } from '../../shared/redis/redis-connections.js';
import { ClusterNode } from './cluster-node.js';
import type { ShardHandler } from './shard-handler.js';
import { LocalCoordination } from './coordination.js';
import { LocalShardLog } from './local-shard-log.js';
import { RedisCoordination } from './redis-coordination.js';
import { RedisShardLog } from './redis-shard-log.js';

/** hostname:pid:random, so two gateways in one process (tests) or one host are distinct members. */
export const defaultMemberId = (): string => `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;

/** A member of the cluster of gateways when Redis is configured (one Redis or a Redis Cluster); otherwise the single member of an embedded gateway. */
export function createClusterNode(config: Config, handler: ShardHandler, logger: Logger): ClusterNode {
  const memberId = config.CLUSTER_MEMBER_ID ?? defaultMemberId();
  const pacing =
    config.CLUSTER_MAX_BACKLOG > 0 ? { maxBacklog: config.CLUSTER_MAX_BACKLOG, waitMs: config.CLUSTER_BACKLOG_WAIT_MS } : undefined;
  const options = { shards: config.CLUSTER_SHARDS, heartbeatMs: config.CLUSTER_HEARTBEAT_MS, ttlMs: config.CLUSTER_MEMBER_TTL_MS, pacing };
  const redis = redisConnections(config);
  if (!redis) return new ClusterNode(new LocalCoordination(memberId), new LocalShardLog(), handler, options, logger);
  return new ClusterNode(
    new RedisCoordination(redis, config.REDIS_PREFIX, memberId, options.ttlMs),
    new RedisShardLog(redis, config.REDIS_PREFIX, memberId),
    handler,
    options,
    logger,
  );
}
