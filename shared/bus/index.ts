import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { redisConnections } from '../redis/redis-connections.js';
import type { Bus, ChannelMap } from './bus.js';
import { LocalBus } from './local-bus.js';
import { RedisBus } from './redis-bus.js';

export type { AnyChannels, Bus, BusHandler, ChannelMap, PublishOptions } from './bus.js';
export { EncodedPayload } from './encoded-payload.js';

/** Redis pub/sub when Redis is configured (sharded on a Redis Cluster), the in-process bus otherwise. */
export function createBus<M extends ChannelMap>(config: Config, logger?: Logger): Bus<M> {
  const redis = redisConnections(config);
  return redis ? new RedisBus<M>(redis, config.REDIS_PREFIX, logger) : new LocalBus<M>(logger);
}
