import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BuildingSchema, OrganizationSchema } from '../../shared/storage/entities/index.js';
import { EmbeddedStorage } from '../../shared/storage/embedded-storage.js';
import { ServerStorage } from '../../shared/storage/server-storage.js';
import type { Storage } from '../../shared/storage/index.js';
import { copyEmbeddedTemplate, serverTemplate } from '../../testkit/storage-template.js';
import { createScratchDatabase, serverDatabaseUrl } from '../../testkit/test-environment.js';

/**
 * Opens storage on a location that survives close(), so the same location can be opened again. The location is
 * empty when `empty` is set (the migrations run from scratch), else a copy of the migrated template that test
 * environments start from (testkit/storage-template.ts): a fresh PGlite initdb plus every migration per test cost
 * this file most of its time, and only the migration test needs it.
 */
interface StorageFactory {
  name: string;
  location(empty: boolean): Promise<{ open(): Promise<Storage>; cleanup(): Promise<void> }>;
}

/**
 * Text the query layer must carry as data, never as syntax: statement and comment delimiters, quotes, escapes and
 * the placeholder marks of both knex (`?`) and PostgreSQL (`$1`), alone and with text on both sides (the embedded
 * driver once split statements on any `;` of the SQL text, quoted or not: review NC1).
 */
const HOSTILE_TEXTS = [
  'a;b',
  'Ward 3; east',
  ';',
  "it's",
  "x'; select 1; --",
  'back\\slash \\',
  'a ? b',
  '\\?',
  'a?b?c',
  '$1 and $2',
  '-- not a comment',
  '/* not a comment',
  'a */ b',
  '&quot;x&quot;',
  'fire; second floor;',
  '%_',
];

const factories: StorageFactory[] = [
  {
    name: 'embedded',
    location: async (empty) => {
      const dir = mkdtempSync(join(tmpdir(), 'floorcast-storage-'));
      if (!empty) await copyEmbeddedTemplate(dir);
      return { open: () => EmbeddedStorage.open(dir), cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
    },
  },
];
const databaseUrl = serverDatabaseUrl;
if (databaseUrl) {
  factories.push({
    name: 'server',
    location: async (empty) => {
      const database = await createScratchDatabase(databaseUrl, empty ? undefined : await serverTemplate(databaseUrl));
      return { open: () => ServerStorage.open(database.url), cleanup: database.drop };
    },
  });
}

describe.each(factories)('storage contract: $name', (factory) => {
  const opened: Storage[] = [];
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => {
    for (const storage of opened.splice(0)) await storage.close().catch(() => undefined);
    await cleanup?.();
  });

  async function open(empty = false) {
    const location = await factory.location(empty);
    cleanup = location.cleanup;
    const storage = await location.open();
    opened.push(storage);
    return { storage, location };
  }

  it('applies every migration at open, and opening again applies none', async () => {
    const { storage, location } = await open(true);
    const applied = await storage.execute<{ name: string }>('select name from mikro_orm_migrations order by id');
    expect(applied.map((row) => row.name)).toContain('m0001-organizations-and-users');
    await storage.close();
    opened.pop();
    const again = await location.open();
    opened.push(again);
    const reapplied = await again.execute<{ name: string }>('select name from mikro_orm_migrations order by id');
    expect(reapplied).toEqual(applied);
  });

  it('round-trips an entity and keeps it across a reopen', async () => {
    const { storage, location } = await open();
    const id = randomUUID();
    const em = storage.em();
    em.create(OrganizationSchema, { id, name: 'Acme Hospital', createdAt: new Date(), updatedAt: new Date() });
    await em.flush();
    await storage.close();
    opened.pop();
    const again = await location.open();
    opened.push(again);
    const found = await again.em().findOne(OrganizationSchema, { id });
    expect(found?.name).toBe('Acme Hospital');
    expect(found?.createdAt).toBeInstanceOf(Date);
  });

  it('rolls a failed transaction back entirely', async () => {
    const { storage } = await open();
    const id = randomUUID();
    await expect(
      storage.em().transactional(async (tx) => {
        tx.create(OrganizationSchema, { id, name: 'doomed', createdAt: new Date(), updatedAt: new Date() });
        await tx.flush();
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect(await storage.em().count(OrganizationSchema, { id })).toBe(0);
  });

  it('runs parameterised raw SQL', async () => {
    const { storage } = await open();
    const rows = await storage.execute<{ sum: number }>('select ?::int + ?::int as sum', [40, 2]);
    expect(rows).toEqual([{ sum: 42 }]);
  });

  it('runs a statement with bound parameters, values taken literally', async () => {
    const { storage } = await open();
    // A plain table: on a server the two calls may run on different pooled connections.
    await storage.execute('create table bound_probe (t text, n int, b bool)');
    const tricky = `it's "quoted", a \\ backslash, a ? mark and $1`;
    await storage.executeBound('insert into bound_probe select * from unnest(?::text[], ?::int[], ?::bool[])', [
      '{"x","y"}',
      '{1,NULL}',
      '{true,false}',
    ]);
    await storage.executeBound('insert into bound_probe values (?, ?, ?)', [tricky, null, true]);
    const rows = await storage.execute<{ t: string; n: number | null; b: boolean }>('select * from bound_probe order by t');
    expect(rows).toEqual([
      { t: tricky, n: null, b: true },
      { t: 'x', n: 1, b: true },
      { t: 'y', n: null, b: false },
    ]);
  });

  it('round-trips hostile text through the ORM: writes, generated ids, filters and updates', async () => {
    const { storage } = await open();
    const organization = randomUUID();
    const em = storage.em();
    em.create(OrganizationSchema, { id: organization, name: 'Hostile; Org', createdAt: new Date(), updatedAt: new Date() });
    await em.flush();
    for (const text of HOSTILE_TEXTS) {
      const write = storage.em();
      const building = write.create(BuildingSchema, {
        organization,
        name: text,
        description: text,
        locationLat: 40,
        locationLng: -3,
        width: 10,
        length: 10,
        rotation: 0,
        customFields: [{ key: text, value: text }],
        createdAt: new Date(),
        updatedAt: new Date(),
      } as never);
      await write.flush();
      // A serial id comes back from `returning`: it must be a number, not lost in a nested result.
      expect(typeof building.id, text).toBe('number');
      const read = await storage.em().findOneOrFail(BuildingSchema, { id: building.id });
      expect({ name: read.name, description: read.description, customFields: read.customFields }, text).toEqual({
        name: text,
        description: text,
        customFields: [{ key: text, value: text }],
      });
      const filtered = await storage.em().find(BuildingSchema, { organization, name: text });
      expect(
        filtered.map((found) => found.id),
        text,
      ).toEqual([building.id]);
      const updated = await storage.em().nativeUpdate(BuildingSchema, { id: building.id, name: text }, { info: `${text}${text}` });
      expect(updated, text).toBe(1);
      expect((await storage.em().findOneOrFail(BuildingSchema, { id: building.id })).info, text).toBe(`${text}${text}`);
    }
    expect(await storage.em().count(BuildingSchema, { organization })).toBe(HOSTILE_TEXTS.length);
  });

  it('round-trips hostile text through raw SQL: parameters, filters, `returning` and transactions', async () => {
    const { storage } = await open();
    await storage.execute('create table hostile_probe (id serial primary key, t text not null)');
    for (const text of HOSTILE_TEXTS) {
      const inserted = await storage.execute<{ id: number; t: string }>('insert into hostile_probe (t) values (?) returning id, t', [text]);
      expect(inserted, text).toEqual([{ id: expect.any(Number), t: text }]);
      expect(await storage.execute('select id, t from hostile_probe where t = ?', [text]), text).toEqual(inserted);
      const inTransaction = await storage.em().transactional(async (tx) => {
        const rows = await tx
          .getConnection()
          .execute<{ t: string }[]>(
            'update hostile_probe set t = ? where id = ? returning t',
            [`${text};${text}`, inserted[0]!.id],
            'all',
            tx.getTransactionContext(),
          );
        return rows;
      });
      expect(inTransaction, text).toEqual([{ t: `${text};${text}` }]);
      const affected = await storage
        .em()
        .getConnection()
        .execute<{ affectedRows: number; rows: unknown[] }>('delete from hostile_probe where t = ?', [`${text};${text}`], 'run');
      expect({ affected: affected.affectedRows, rows: affected.rows }, text).toEqual({ affected: 1, rows: [] });
    }
    expect(await storage.execute('select * from hostile_probe')).toEqual([]);
  });

  it('rolls back a transaction whose values hold `;`, and counts affected rows as the server does', async () => {
    const { storage } = await open();
    const id = randomUUID();
    await expect(
      storage.em().transactional(async (tx) => {
        tx.create(OrganizationSchema, { id, name: 'doomed; really', createdAt: new Date(), updatedAt: new Date() });
        await tx.flush();
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect(await storage.em().count(OrganizationSchema, { id })).toBe(0);
    const selected = await storage
      .em()
      .getConnection()
      .execute<{ affectedRows: number; rows: unknown[] }>("select 'a;b' as t union all select 'c;d'", [], 'run');
    expect({ affected: selected.affectedRows, rows: selected.rows }).toEqual({ affected: 2, rows: [{ t: 'a;b' }, { t: 'c;d' }] });
  });

  it('answers ping, and fails it once closed', async () => {
    const { storage } = await open();
    await expect(storage.ping()).resolves.toBeUndefined();
    await storage.close();
    opened.pop();
    await expect(storage.ping()).rejects.toBeDefined();
  });
});
