import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeviceDirectory } from '../../gateway/realtime/device-directory.js';
import type { Storage } from '../../shared/storage/index.js';
import { driverLabel, openOrganizationStorage } from '../../testkit/test-environment.js';

/** The directory needs a bus only for change announcements; these tests make none. */
const silentBus = { subscribe: async () => undefined, onResync: () => undefined, publish: async () => undefined };

describe(`device directory on the database (${driverLabel})`, () => {
  let storage: Storage;
  let organizationId: string;
  let close: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    ({ storage, organizationId, close } = await openOrganizationStorage());
  });
  afterAll(async () => close?.());

  it('registers a new device once when two gateways get its first uploads at the same time', async () => {
    const gateways = [new DeviceDirectory(storage, silentBus as never), new DeviceDirectory(storage, silentBus as never)];
    const identifiers = ['race-1', 'race-2', 'race-3'];
    const answers = await Promise.all([...gateways, ...gateways].map((directory) => directory.resolve(organizationId, identifiers)));
    const ids = answers.map((devices) => devices.map((device) => device?.id));
    for (const answer of ids) expect(answer).toEqual(ids[0]);
    expect(new Set(ids[0]).size).toBe(3);
    const rows = await storage.execute<{ n: number }>(
      'select count(*)::int as n from devices where organization_id = ? and identifier like ?',
      [organizationId, 'race-%'],
    );
    expect(rows[0]!.n).toBe(3);
  });

  it('picks up a reassignment made elsewhere, unannounced, by its background refresh', async () => {
    let now = 1_000_000;
    const directory = new DeviceDirectory(storage, silentBus as never, { ttlMs: 60_000, now: () => now });
    expect((await directory.resolve(organizationId, ['moved']))[0]?.userId).toBeNull();
    const userId = crypto.randomUUID();
    await storage.execute("insert into users (id, organization_id, email, password_hash, role) values (?, ?, ?, 'x', 'user')", [
      userId,
      organizationId,
      `${userId}@example.test`,
    ]);
    await storage.execute('update devices set user_id = ? where organization_id = ? and identifier = ?', [userId, organizationId, 'moved']);
    now += 30_000;
    await expect.poll(async () => (await directory.resolve(organizationId, ['moved']))[0]?.userId).toBe(userId);
  });
});
