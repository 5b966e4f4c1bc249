import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Config } from '../../shared/config.js';

export interface LimiterOptions {
  /** Names the limiter inside the deployment's prefix (e.g. `login:account`). */
  name: string;
  points: number;
  durationSeconds: number;
}

/**
 * Where counters live: in Redis when REDIS_URL is set, so every gateway shares them, in process memory
 * otherwise. Both are atomic increments that expire on their own (no table to sweep).
 */
export interface LimiterBackend {
  readonly kind: 'memory' | 'redis';
  create(options: LimiterOptions): RateLimiterAbstract;
  close(): Promise<void>;
}

export function createLimiterBackend(config: Config): LimiterBackend {
  if (!config.REDIS_URL) {
    return {
      kind: 'memory',
      create: ({ name, points, durationSeconds }) => new RateLimiterMemory({ keyPrefix: name, points, duration: durationSeconds }),
      close: async () => undefined,
    };
  }
  // Its own connection, so a limiter never waits behind the bus's traffic.
  const client = new Redis(config.REDIS_URL, { maxRetriesPerRequest: 1, connectionName: 'floorcast-limits' });
  client.on('error', () => undefined); // reported by the requests that fail; reconnects on its own
  return {
    kind: 'redis',
    create: ({ name, points, durationSeconds }) =>
      new RateLimiterRedis({ storeClient: client, keyPrefix: `${config.REDIS_PREFIX}:limit:${name}`, points, duration: durationSeconds }),
    close: async () => {
      client.disconnect();
    },
  };
}
