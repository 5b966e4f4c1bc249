import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EvacuationStore, type EvacuationRow } from '../../gateway/evacuations/evacuation-store.js';
import type { Fix, RollEntry } from '../../gateway/evacuations/roll.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { PositionStore } from '../../shared/positions/position-store.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { openStorage, type Storage } from '../../shared/storage/index.js';
import { createTestEnvironment, driverLabel, type TestEnvironment } from '../../testkit/test-environment.js';

const DAY = 86_400_000;
/** A minute before midnight UTC, so a day later is another partition of positions. */
const T0 = Date.UTC(2026, 0, 10, 23, 59, 0, 123);

/** A seeded generator, so a failure replays. */
function random(seed: number) {
  let state = seed >>> 0;
  return () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

/**
 * The roll's reads (issue 31's GET of 5,000 entries): the roll comes back as one JSON text and the missing
 * people's newest fixes from one probe per device (evacuation-store.ts). Both must answer exactly what the
 * rows hold, whatever the values: floats to the last bit, quotes and non-ASCII text, nulls, partitions.
 */
describe(`the evacuation store's roll and last fixes (${driverLabel})`, () => {
  let environment: TestEnvironment;
  let storage: Storage;
  let store: EvacuationStore;
  const organizationId = randomUUID();
  const otherOrganizationId = randomUUID();

  beforeAll(async () => {
    environment = await createTestEnvironment();
    storage = await openStorage(environment.config);
    store = new EvacuationStore(storage);
    for (const id of [organizationId, otherOrganizationId])
      await storage.execute('insert into organizations (id, name) values (?, ?)', [id, `Org ${id}`]);
  });
  afterAll(async () => {
    await storage?.close();
    await environment?.cleanup();
  });

  const fix = (deviceId: string, userId: string | null, at: number, values: Partial<Fix> = {}): Fix => ({
    deviceId,
    userId,
    buildingId: null,
    floorId: 12,
    x: 0.1 + 0.2,
    y: -1e-7,
    lat: 40.123456789012344,
    lng: -3.7038,
    at,
    ...values,
  });

  it('reads the roll back exactly as its rows hold it, in seq order, and only the changes after a seq', async () => {
    const evacuation: EvacuationRow = {
      id: randomUUID(),
      organizationId,
      buildingId: 7,
      floorIds: null,
      note: null,
      drill: true,
      startedAt: new Date(T0),
      startedBy: { user_id: randomUUID(), email: 'warden@example.com' },
      endedAt: null,
      endedBy: null,
    };
    const [alice, bob] = [randomUUID(), randomUUID()];
    const entry = (personKey: string, values: Partial<RollEntry>): RollEntry => ({
      personKey,
      userId: null,
      deviceIds: [],
      arrival: false,
      status: 'missing',
      statusAt: T0,
      pointId: null,
      pointName: null,
      fix: null,
      ...values,
    });
    const roll = [
      entry(`user:${alice}`, { userId: alice, deviceIds: ['a-phone', 'a-badge'], fix: fix('a-phone', alice, T0 - 61_001) }),
      entry('device:tag "7" \\ ünïcode ✓', { deviceIds: ['tag "7" \\ ünïcode ✓'], status: 'left_site', statusAt: T0 + 1 }),
      entry('device:outdoor', {
        deviceIds: ['outdoor'],
        arrival: true,
        fix: fix('outdoor', null, T0 + 999, { floorId: null, x: null, y: null, lat: -33.8688197, lng: 151.2092955 }),
      }),
      entry(`user:${bob}`, { userId: bob, deviceIds: ['b-phone'], fix: fix('b-phone', bob, T0 - 5, { x: 1e21, y: 123456.789 }) }),
      entry('device:walker', { deviceIds: ['walker'], fix: fix('walker', null, T0 - 7) }),
    ];
    await storage.em().transactional((tx) => store.insert(tx as EntityManager, evacuation, roll));
    const declared = await store.roll(evacuation.id);
    const lastAtDeclaration = Math.max(...declared.map((stored) => stored.seq));

    const warden = { user_id: randomUUID(), email: 'o’brien@example.com' };
    const comment = `Seen outside; "quoted" 'single' \\ back\nnew line, ✓ and 🚒`;
    await storage
      .em()
      .transactional((tx) => store.markSafe(tx as EntityManager, evacuation.id, `user:${bob}`, warden, comment, new Date(T0 + 2)));
    const point = { id: randomUUID(), name: 'Car "park" A' };
    const reached = fix('walker', null, T0 + 3_000, { x: 145.25, y: 5.5 });
    await storage
      .em()
      .transactional((tx) => store.reachedPoint(tx as EntityManager, evacuation.id, 'device:walker', point, new Date(T0 + 3_001), reached));

    const read = await store.roll(evacuation.id);
    // Row by row (the per-entry read, as rows): the same entries, value for value.
    const byRow = await Promise.all(read.map((stored) => store.entry(evacuation.id, stored.personKey)));
    expect(read).toEqual(byRow);
    expect(read.map((stored) => stored.seq)).toEqual([...read.map((stored) => stored.seq)].sort((a, b) => a - b));
    const byKey = new Map(read.map((stored) => [stored.personKey, stored]));
    expect(byKey.get(`user:${alice}`)).toEqual({ ...roll[0], markedBy: null, comment: null, seq: expect.any(Number) });
    expect(byKey.get('device:tag "7" \\ ünïcode ✓')).toEqual({ ...roll[1], markedBy: null, comment: null, seq: expect.any(Number) });
    // A fix kept on the roll has no building and names the entry's first device (entryOf).
    expect(byKey.get('device:outdoor')!.fix).toEqual({ ...roll[2]!.fix, userId: null });
    expect(byKey.get(`user:${bob}`)).toMatchObject({ status: 'safe_manual', statusAt: T0 + 2, markedBy: warden, comment });
    expect(byKey.get(`user:${bob}`)!.fix).toEqual(roll[3]!.fix);
    expect(byKey.get('device:walker')).toMatchObject({
      status: 'safe',
      statusAt: T0 + 3_001,
      pointId: point.id,
      pointName: point.name,
      fix: { ...reached, deviceId: 'walker' },
    });
    // After the declaration's seqs: the two changes, in the order they were made.
    expect((await store.roll(evacuation.id, lastAtDeclaration)).map((stored) => stored.personKey)).toEqual([
      `user:${bob}`,
      'device:walker',
    ]);
    expect(await store.roll(evacuation.id, Math.max(...read.map((stored) => stored.seq)))).toEqual([]);
    expect(await store.roll(randomUUID())).toEqual([]);
  });

  it("finds each asked device's newest stored fix since a time, across day partitions, in its organization only", async () => {
    const since = new Date(T0);
    const next = random(31);
    const records: PositionRecord[] = [];
    const position = (organization: string, deviceId: string, timestamp: number): PositionRecord => ({
      organizationId: organization,
      deviceId,
      userId: next() < 0.5 ? null : randomUUID(),
      buildingId: next() < 0.2 ? null : 1 + Math.floor(next() * 3),
      floorId: next() < 0.2 ? null : 1 + Math.floor(next() * 9),
      indoor: true,
      x: next() * 120,
      y: next() < 0.1 ? null : next() * 80 - 40,
      lat: 40 + next(),
      lng: -3 - next(),
      yaw: 0,
      accuracy: null,
      timestamp,
      receivedAt: timestamp,
    });
    // 300 devices, up to 6 fixes each from an hour before `since` to a day and a half after (two partitions on);
    // the other organization uses the same identifiers with newer fixes, which must not be taken.
    for (let d = 0; d < 300; d++) {
      const deviceId = d % 10 === 0 ? `dev "${d}" ü` : `dev-${d}`;
      const times = new Set(Array.from({ length: Math.floor(next() * 7) }, () => T0 - 3_600_000 + Math.floor(next() * 1.5 * DAY)));
      for (const timestamp of times) records.push(position(organizationId, deviceId, timestamp));
      if (d % 3 === 0) records.push(position(otherOrganizationId, deviceId, T0 + 2 * DAY));
    }
    records.push(position(organizationId, 'exactly-since', T0), position(organizationId, 'just-before', T0 - 1));
    await new PositionStore(storage).insert(records);

    const asked = [
      ...Array.from({ length: 250 }, (_, d) => (d % 10 === 0 ? `dev "${d}" ü` : `dev-${d}`)),
      'exactly-since',
      'just-before',
      'never',
    ];
    const expected = new Map<string, Fix>();
    for (const record of records) {
      if (record.organizationId !== organizationId || !asked.includes(record.deviceId) || record.timestamp < T0) continue;
      const held = expected.get(record.deviceId);
      if (held && held.at >= record.timestamp) continue;
      const { deviceId, userId, buildingId, floorId, x, y, lat, lng, timestamp } = record;
      expected.set(deviceId, { deviceId, userId, buildingId, floorId, x, y, lat, lng, at: timestamp });
    }
    const found = await store.latestOf(organizationId, asked, since);
    expect(new Map([...found].sort(([a], [b]) => (a < b ? -1 : 1)))).toEqual(new Map([...expected].sort(([a], [b]) => (a < b ? -1 : 1))));
    expect(found.has('exactly-since')).toBe(true);
    expect(found.has('just-before')).toBe(false);
    expect(await store.latestOf(organizationId, [], since)).toEqual(new Map());
  });
});
