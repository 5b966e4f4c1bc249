import { MikroORM } from '@mikro-orm/core';
import { PostgreSqlDriver } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.js';
import { OrmStorage, commonOrmOptions } from './storage.js';

/** PostgreSQL server, selected by DATABASE_URL. */
export class ServerStorage extends OrmStorage {
  readonly kind = 'server' as const;

  static async open(databaseUrl: string, logger?: Logger): Promise<ServerStorage> {
    const orm = (await MikroORM.init({
      ...commonOrmOptions(logger),
      driver: PostgreSqlDriver,
      clientUrl: databaseUrl,
      pool: { min: 0, max: 10 },
    } as never)) as unknown as MikroORM<PostgreSqlDriver>;
    const storage = new ServerStorage(orm);
    await storage.migrate();
    return storage;
  }
}
