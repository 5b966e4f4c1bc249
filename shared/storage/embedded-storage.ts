import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { MikroORM } from '@mikro-orm/core';
import type { PostgreSqlDriver } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.js';
import { SingleStatementPGliteDriver, allowingMultiStatementText } from './single-statement-driver.js';
import { OrmStorage, commonOrmOptions } from './storage.js';

/**
 * Embedded PostgreSQL (PGlite, WebAssembly) under `<DATA_DIR>/pg`, for `npm start` with no database
 * server. PGlite has one connection, so transactions are serialised by the driver's pool of one. Every query,
 * ORM or raw, is one statement on PGlite's `query` path (see single-statement-driver.ts); only `migrate` may
 * send several statements in one text.
 */
export class EmbeddedStorage extends OrmStorage {
  readonly kind = 'embedded' as const;

  private constructor(
    orm: MikroORM<PostgreSqlDriver>,
    private readonly pglite: PGlite,
  ) {
    super(orm);
  }

  /** `dataDir` undefined keeps the database in memory (tests that need no persistence). */
  static async open(dataDir: string | undefined, logger?: Logger): Promise<EmbeddedStorage> {
    let directory: string | undefined;
    if (dataDir !== undefined) {
      directory = join(dataDir, 'pg');
      mkdirSync(directory, { recursive: true });
    }
    const pglite = await PGlite.create(directory);
    const orm = (await MikroORM.init({
      ...commonOrmOptions(logger),
      driver: SingleStatementPGliteDriver,
      dbName: 'postgres',
      driverOptions: { connection: { pglite: () => pglite } },
    } as never)) as unknown as MikroORM<PostgreSqlDriver>;
    const storage = new EmbeddedStorage(orm, pglite);
    await storage.migrate();
    return storage;
  }

  /** The migrator alone may run multi-statement text (a migration's SQL as written), and says so here. */
  override migrate(): Promise<void> {
    return allowingMultiStatementText(() => super.migrate());
  }

  override async close(): Promise<void> {
    await super.close();
    if (!this.pglite.closed) await this.pglite.close();
  }
}
