import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { Bus } from './bus.js';
import { LocalBus } from './local-bus.js';
import { RedisBus } from './redis-bus.js';

export type { Bus, BusHandler } from './bus.js';
export { EncodedPayload } from './encoded-payload.js';

/** Redis pub/sub when REDIS_URL is set, the in-process bus otherwise. */
export function createBus(config: Config, logger?: Logger): Bus {
  return config.REDIS_URL ? new RedisBus(config.REDIS_URL, config.REDIS_PREFIX, logger) : new LocalBus(logger);
}
