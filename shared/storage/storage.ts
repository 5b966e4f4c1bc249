import type { MikroORM, Options } from '@mikro-orm/core';
import type { EntityManager, PostgreSqlDriver } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import { StorageUnavailableError, isOutageError } from '../errors.js';
import type { Logger } from '../logger.js';
import { allEntities } from './entities/index.js';
import { migrationsList } from './migrations/index.js';

/**
 * Storage is PostgreSQL either way: embedded (PGlite, one process, data under DATA_DIR) or a server.
 * Both speak the same SQL, so everything above this interface is written once.
 */
export interface Storage {
  readonly kind: 'embedded' | 'server';
  readonly orm: MikroORM<PostgreSqlDriver>;
  /** A fresh unit of work; never share one between requests. */
  em(): EntityManager;
  /** Raw SQL with `?` placeholders, for the hot path and reports. */
  execute<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  /**
   * A statement whose parameters travel bound, not inlined: for the hot path's large array literals, which
   * inlining would escape on our side and make the server lex as one huge SQL string. `?` placeholders; no
   * array expansion (pass array literals, see pg-array.ts); no rows returned.
   */
  executeBound(sql: string, params: readonly (string | number | boolean | null)[]): Promise<void>;
  /** Resolves when the database answers (used by /readyz). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** ORM options both implementations share: the entities, the migrations, the logger. */
export function commonOrmOptions(logger?: Logger): Partial<Options> {
  return {
    entities: allEntities,
    extensions: [Migrator],
    migrations: { migrationsList, transactional: true, allOrNothing: true, snapshot: false },
    allowGlobalContext: false,
    forceUtcTimezone: true,
    discovery: { warnWhenNoEntities: false },
    debug: false,
    logger: (message: string) => logger?.debug({ orm: message }, 'orm'),
  };
}

/** A driver error that means "the database is down" becomes the one error class callers (and the HTTP layer) know. */
const outage = (error: unknown): unknown =>
  isOutageError(error) && !(error instanceof StorageUnavailableError) ? new StorageUnavailableError(undefined, error) : error;

/** Base class: everything but how the ORM is opened and closed. */
export abstract class OrmStorage implements Storage {
  abstract readonly kind: 'embedded' | 'server';

  protected constructor(readonly orm: MikroORM<PostgreSqlDriver>) {}

  em(): EntityManager {
    return this.orm.em.fork() as EntityManager;
  }

  async execute<T>(sql: string, params: readonly unknown[] = []): Promise<T[]> {
    try {
      return (await this.orm.em.getConnection().execute(sql, params as unknown[], 'all')) as T[];
    } catch (error) {
      throw outage(error);
    }
  }

  async executeBound(sql: string, params: readonly (string | number | boolean | null)[]): Promise<void> {
    try {
      await this.orm.em
        .getConnection()
        .getKnex()
        .raw(sql, params as (string | number | boolean | null)[]);
    } catch (error) {
      throw outage(error);
    }
  }

  async ping(): Promise<void> {
    await this.execute('select 1');
  }

  /** Applies pending migrations; run at every boot so the schema is always the code's. */
  async migrate(): Promise<void> {
    await this.orm.getMigrator().up();
  }

  async close(): Promise<void> {
    await this.orm.close(true);
  }
}
