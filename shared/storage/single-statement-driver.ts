import { AsyncLocalStorage } from 'node:async_hooks';
import type { PGliteInterface, Results } from '@electric-sql/pglite';
import { AbstractSqlDriver, PostgreSqlPlatform, type Configuration } from '@mikro-orm/postgresql';
import { PGliteConnection, PGliteDialectDataSource, PGliteKnexDialect, type QueryObject } from 'mikro-orm-pglite';

/** Set only around the migration runner: the one caller allowed to send several statements in one text. */
const multiStatementText = new AsyncLocalStorage<true>();

/** Runs `work` (the migrator) with multi-statement SQL text allowed for the queries it issues. */
export function allowingMultiStatementText<T>(work: () => Promise<T>): Promise<T> {
  return multiStatementText.run(true, work);
}

/**
 * The PGlite dialect, minus its guess at "multi-statement": knex-pglite sends any raw text that `split(';')`
 * cuts in two to `exec` (which returns one result per statement, read by the ORM as nested rows), and MikroORM
 * inlines every value into the text, so a `;` inside a quoted value was enough (review NC1). Here every query
 * takes PGlite's single-statement `query` path, as a server's extended protocol would; a text holding two
 * statements is refused by PostgreSQL instead of being misread. Only the migration runner, inside
 * `allowingMultiStatementText`, runs its texts through `exec`.
 */
class SingleStatementDialect extends PGliteKnexDialect {
  override async _query(connection: PGliteInterface, obj: QueryObject): Promise<QueryObject> {
    if (!obj.sql) throw new Error('The query is empty');
    const bindings = (obj.bindings ?? []) as unknown[];
    if (multiStatementText.getStore() && bindings.length === 0) {
      const results = await connection.exec(obj.sql);
      // One statement reads exactly as `query` would; several read as a server's simple protocol answers them.
      obj.response = results.length === 1 ? results[0] : results;
    } else {
      obj.response = await connection.query(obj.sql, bindings);
    }
    return obj;
  }
}

/** PGliteConnection over the dialect above, mapping results exactly as MikroORM's PostgreSqlConnection maps pg's. */
class SingleStatementConnection extends PGliteConnection {
  private readonly source = new PGliteDialectDataSource();

  override createKnex(): void {
    // knex takes a client class where the typings say a client name.
    this.client = this.createKnexClient(SingleStatementDialect as unknown as string);
    const dialect = this.getKnex().client as unknown as { ormConfig: unknown; driver: unknown };
    dialect.ormConfig = this.config;
    dialect.driver = this.source;
    this.connected = true;
  }

  protected override transformRawResult<T>(response: Results | Results[], method: 'all' | 'get' | 'run'): T {
    if (Array.isArray(response)) return response.map((result) => this.transformRawResult(result, method)) as T;
    if (method === 'get') return response.rows[0] as T;
    if (method === 'all') return response.rows as T;
    const rows = response.rows as Record<string, unknown>[];
    // pg's rowCount is the rows a SELECT returned, or the rows a write touched; PGlite counts only the latter.
    return { affectedRows: response.affectedRows || rows.length, insertId: rows[0] ? rows[0].id : 0, row: rows[0], rows } as T;
  }
}

/** The embedded storage's MikroORM driver: PostgreSQL's platform over one PGlite, one statement per query. */
export class SingleStatementPGliteDriver extends AbstractSqlDriver<SingleStatementConnection> {
  constructor(config: Configuration) {
    super(config, new PostgreSqlPlatform(), SingleStatementConnection, ['knex', '@electric-sql/pglite', '@harryplusplus/knex-pglite']);
  }
}
