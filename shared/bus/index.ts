import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { Bus, ChannelMap } from './bus.js';
import { LocalBus } from './local-bus.js';
import { RedisBus } from './redis-bus.js';

export type { AnyChannels, Bus, BusHandler, ChannelMap } from './bus.js';
export { EncodedPayload } from './encoded-payload.js';

/** Redis pub/sub when REDIS_URL is set, the in-process bus otherwise. */
export function createBus<M extends ChannelMap>(config: Config, logger?: Logger): Bus<M> {
  return config.REDIS_URL ? new RedisBus<M>(config.REDIS_URL, config.REDIS_PREFIX, logger) : new LocalBus<M>(logger);
}
