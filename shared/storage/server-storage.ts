import { MikroORM } from '@mikro-orm/core';
import { PostgreSqlDriver } from '@mikro-orm/postgresql';
import pg from 'pg';
import type { Logger } from '../logger.js';
import { OrmStorage, commonOrmOptions } from './storage.js';

export interface ServerStorageTimeouts {
  /** Server-side `statement_timeout` of every connection. */
  statementTimeoutMs: number;
  /** Waiting for a pool slot, and for a new connection to open. */
  acquireTimeoutMs: number;
}

export const DEFAULT_SERVER_TIMEOUTS: ServerStorageTimeouts = { statementTimeoutMs: 30_000, acquireTimeoutMs: 5000 };

/** Connections of the positions writer's pool: one per group commit in flight (gateway/app.ts allows 4). */
export const WRITER_POOL_SIZE = 4;

/**
 * PostgreSQL server, selected by DATABASE_URL. Every wait is bounded, so an outage answers 503 instead of hanging
 * requests: a statement timeout on the server, and acquire and connect timeouts in the pool. Dead connections
 * are dropped by the pool and new ones are opened on demand, so the gateway recovers by itself when the server
 * is back.
 */
export class ServerStorage extends OrmStorage {
  readonly kind = 'server' as const;

  private constructor(
    orm: MikroORM<PostgreSqlDriver>,
    /**
     * Plain `pg` connections for the positions writer's binary COPY (position-store.ts), beside the ORM's pool:
     * the hot path's commits go through no ORM and never wait behind the requests' queries for a connection.
     * Same timeouts as the ORM's pool; connections open on first use.
     */
    readonly writerPool: pg.Pool,
  ) {
    super(orm);
  }

  static async open(
    databaseUrl: string,
    logger?: Logger,
    timeouts: ServerStorageTimeouts = DEFAULT_SERVER_TIMEOUTS,
  ): Promise<ServerStorage> {
    const orm = (await MikroORM.init({
      ...commonOrmOptions(logger),
      driver: PostgreSqlDriver,
      clientUrl: databaseUrl,
      pool: { min: 0, max: 10, acquireTimeoutMillis: timeouts.acquireTimeoutMs, createTimeoutMillis: timeouts.acquireTimeoutMs },
      driverOptions: {
        // knex's own warnings ("Connection Error: ..." during an outage) go to our log, not to the console.
        log: {
          warn: (message: unknown) => logger?.warn({ knex: String(message) }, 'database connection'),
          error: (message: unknown) => logger?.error({ knex: String(message) }, 'database connection'),
          deprecate: () => undefined,
          debug: () => undefined,
        },
        acquireConnectionTimeout: timeouts.acquireTimeoutMs,
        connection: {
          statement_timeout: timeouts.statementTimeoutMs,
          connectionTimeoutMillis: timeouts.acquireTimeoutMs,
          keepAlive: true,
        },
      },
    } as never)) as unknown as MikroORM<PostgreSqlDriver>;
    const writerPool = new pg.Pool({
      connectionString: databaseUrl,
      max: WRITER_POOL_SIZE,
      connectionTimeoutMillis: timeouts.acquireTimeoutMs,
      statement_timeout: timeouts.statementTimeoutMs,
      keepAlive: true,
    });
    // An idle connection the server drops (restart, outage) is only logged; the pool opens a new one on demand.
    writerPool.on('error', (error) => logger?.warn({ err: error }, 'idle writer connection lost'));
    const storage = new ServerStorage(orm, writerPool);
    await storage.migrate();
    return storage;
  }

  override async close(): Promise<void> {
    try {
      await super.close();
    } finally {
      if (!this.writerPool.ended) await this.writerPool.end();
    }
  }
}
