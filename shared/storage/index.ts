import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { EmbeddedStorage } from './embedded-storage.js';
import { ServerStorage } from './server-storage.js';
import type { Storage } from './storage.js';

export type { Storage } from './storage.js';

/** PostgreSQL at DATABASE_URL when set, embedded PostgreSQL under DATA_DIR otherwise; migrated before use. */
export function openStorage(config: Config, logger?: Logger): Promise<Storage> {
  return config.DATABASE_URL
    ? ServerStorage.open(config.DATABASE_URL, logger, {
        statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
        acquireTimeoutMs: config.DATABASE_ACQUIRE_TIMEOUT_MS,
      })
    : EmbeddedStorage.open(config.DATA_DIR, logger);
}
