import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedStorage } from '../../shared/storage/embedded-storage.js';
import { allowingMultiStatementText } from '../../shared/storage/single-statement-driver.js';

/**
 * The embedded driver never guesses at statements (review NC1): every query is one statement on PGlite's
 * `query` path, so text holding two is refused by PostgreSQL; only the migrator, explicitly, may send several.
 */
describe('embedded driver: one statement per query', () => {
  let storage: EmbeddedStorage;
  beforeAll(async () => {
    storage = await EmbeddedStorage.open(undefined);
  });
  afterAll(async () => storage?.close());

  it('refuses text holding two statements, and runs nothing of it', async () => {
    await storage.execute('create table two_statements (t text)');
    await expect(storage.execute("insert into two_statements values ('a'); insert into two_statements values ('b')")).rejects.toThrow(
      /multiple commands/,
    );
    expect(await storage.execute('select * from two_statements')).toEqual([]);
  });

  it("reads a statement whose values hold ';' as one result, not a nested one", async () => {
    expect(await storage.execute("select 'a;b' as t, ? as u", ['c; d'])).toEqual([{ t: 'a;b', u: 'c; d' }]);
  });

  it('runs multi-statement text where the migrator is allowed to, one statement reading as `query` would', async () => {
    await allowingMultiStatementText(() => storage.execute('create table migrated_a (x int); create table migrated_b (y int)'));
    expect(await storage.execute("select count(*)::int as n from pg_tables where tablename in ('migrated_a', 'migrated_b')")).toEqual([
      { n: 2 },
    ]);
    expect(await allowingMultiStatementText(() => storage.execute("select 'x;y' as t"))).toEqual([{ t: 'x;y' }]);
    // Outside that scope, the same text is refused again.
    await expect(storage.execute('create table migrated_c (x int); create table migrated_d (y int)')).rejects.toThrow(/multiple commands/);
  });
});
