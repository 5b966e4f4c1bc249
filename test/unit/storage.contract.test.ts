import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { OrganizationSchema } from '../../shared/storage/entities/index.js';
import { EmbeddedStorage } from '../../shared/storage/embedded-storage.js';
import { ServerStorage } from '../../shared/storage/server-storage.js';
import type { Storage } from '../../shared/storage/index.js';
import { createScratchDatabase, serverDatabaseUrl } from '../support/test-environment.js';

/** Opens storage on a location that survives close(), so the same location can be opened again. */
interface StorageFactory {
  name: string;
  location(): Promise<{ open(): Promise<Storage>; cleanup(): Promise<void> }>;
}

const factories: StorageFactory[] = [
  {
    name: 'embedded',
    location: async () => {
      const dir = mkdtempSync(join(tmpdir(), 'floorcast-storage-'));
      return { open: () => EmbeddedStorage.open(dir), cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
    },
  },
];
const databaseUrl = serverDatabaseUrl;
if (databaseUrl) {
  factories.push({
    name: 'server',
    location: async () => {
      const database = await createScratchDatabase(databaseUrl);
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

  async function open() {
    const location = await factory.location();
    cleanup = location.cleanup;
    const storage = await location.open();
    opened.push(storage);
    return { storage, location };
  }

  it('applies every migration at open, and opening again applies none', async () => {
    const { storage, location } = await open();
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
    await storage.executeBound('insert into bound_probe select * from unnest(?::text[], ?::int[], ?::bool[])', ['{"x","y"}', '{1,NULL}', '{true,false}']);
    await storage.executeBound('insert into bound_probe values (?, ?, ?)', [tricky, null, true]);
    const rows = await storage.execute<{ t: string; n: number | null; b: boolean }>('select * from bound_probe order by t');
    expect(rows).toEqual([{ t: tricky, n: null, b: true }, { t: 'x', n: 1, b: true }, { t: 'y', n: null, b: false }]);
  });

  it('answers ping, and fails it once closed', async () => {
    const { storage } = await open();
    await expect(storage.ping()).resolves.toBeUndefined();
    await storage.close();
    opened.pop();
    await expect(storage.ping()).rejects.toBeDefined();
  });
});
