import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Storage } from '../../shared/storage/index.js';
import { PositionStore } from '../../shared/positions/position-store.js';
import type { ZoneEventRecord } from '../../shared/detection/zone-event.js';
import { driverLabel, openOrganizationStorage } from '../../testkit/test-environment.js';
import { outdoorRecord } from '../../testkit/positions.js';

const DAY = 24 * 3600 * 1000;

describe(`positions table: partitions and retention (${driverLabel})`, () => {
  let storage: Storage;
  let organizationId: string;
  let close: (() => Promise<void>) | undefined;
  const at = (timestamp: number, deviceId = 'd') => outdoorRecord({ organizationId, deviceId, timestamp });

  beforeAll(async () => {
    ({ storage, organizationId, close } = await openOrganizationStorage());
  });
  afterAll(async () => close?.());

  it('creates one partition per day on demand and keeps text with quotes and commas intact', async () => {
    const store = new PositionStore(storage);
    const now = Date.UTC(2026, 10, 22, 12);
    await store.insert([at(now, 'a "quoted", device'), at(now - DAY, 'b\\\\slash'), at(now - 3 * DAY)]);
    const partitions = await storage.execute<{ name: string }>(
      "select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent where p.relname = 'positions' order by 1",
    );
    expect(partitions.map((p) => p.name)).toEqual(['positions_p20261119', 'positions_p20261121', 'positions_p20261122']);
    const devices = await storage.execute<{ device_id: string }>('select device_id from positions order by ts desc');
    expect(devices.map((d) => d.device_id)).toEqual(['a "quoted", device', 'b\\\\slash', 'd']);
  });

  it('stores times to the millisecond, as epoch milliseconds travel', async () => {
    const store = new PositionStore(storage);
    const times = [Date.UTC(2026, 10, 22, 12, 0, 0, 1), Date.UTC(2026, 10, 22, 23, 59, 59, 999), Date.UTC(2026, 10, 21, 0, 0, 0, 0)];
    await store.insert(times.map((timestamp) => ({ ...at(timestamp, 'ms-device'), receivedAt: timestamp + 7 })));
    const rows = await storage.execute<{ ts: Date | string; received_at: Date | string; us: string }>(
      "select ts, received_at, (extract(microseconds from ts)::int % 1000)::text as us from positions where device_id = 'ms-device' order by ts",
    );
    const sorted = [...times].sort((a, b) => a - b);
    expect(rows.map((row) => new Date(row.ts).getTime())).toEqual(sorted);
    expect(rows.map((row) => new Date(row.received_at).getTime())).toEqual(sorted.map((t) => t + 7));
    expect(rows.map((row) => row.us)).toEqual(['0', '0', '0']);
    await storage.execute("delete from positions where device_id = 'ms-device'");
  });

  it('drops whole day partitions past retention and keeps the rest', async () => {
    const store = new PositionStore(storage);
    const now = Date.UTC(2026, 10, 22, 12);
    const dropped = await store.dropPartitionsOlderThan(2, now);
    expect(dropped).toEqual(['positions_p20261119']);
    const [row] = await storage.execute<{ n: number }>('select count(*)::int as n from positions');
    expect(row!.n).toBe(2);
    // A new write to a dropped day recreates its partition.
    await store.insert([at(now - 3 * DAY)]);
    const [again] = await storage.execute<{ n: number }>('select count(*)::int as n from positions');
    expect(again!.n).toBe(3);
  });

  it("commits a batch's zone events with its positions, and neither when one of them is refused", async () => {
    const store = new PositionStore(storage);
    const now = Date.UTC(2026, 10, 22, 13);
    const event = (type: 'enter' | 'exit', zoneKind: ZoneEventRecord['zoneKind'] = 'geofence'): ZoneEventRecord => ({
      organizationId,
      buildingId: 7,
      floorId: 3,
      zoneKind,
      zoneId: 'fence-1',
      zoneName: 'Fence',
      deviceId: 'zone-device',
      userId: null,
      type,
      at: now,
      firedAt: now + 1000,
    });
    await store.insert([at(now, 'zone-device')], [event('enter'), event('exit')]);
    const stored = await storage.execute<{ type: string; fired_at: Date | string }>(
      "select type, fired_at from zone_events where device_id = 'zone-device' order by type",
    );
    expect(stored.map((row) => row.type)).toEqual(['enter', 'exit']);
    expect(new Date(stored[0]!.fired_at).getTime()).toBe(now + 1000);
    // Zone events alone (a sweep's exits) need no positions.
    await store.insert([], [event('exit')]);
    const count = async (sql: string) => (await storage.execute<{ n: number }>(sql))[0]!.n;
    expect(await count("select count(*)::int as n from zone_events where device_id = 'zone-device'")).toBe(3);
    // One statement: an event the table refuses takes the positions down with it.
    const positionsBefore = await count("select count(*)::int as n from positions where device_id = 'zone-device'");
    await expect(store.insert([at(now + 1, 'zone-device')], [event('enter', 'bogus' as never)])).rejects.toThrow();
    expect(await count("select count(*)::int as n from positions where device_id = 'zone-device'")).toBe(positionsBefore);
    expect(await count("select count(*)::int as n from zone_events where device_id = 'zone-device'")).toBe(3);
  });

  const partitionNames = async () =>
    (
      await storage.execute<{ name: string }>(
        "select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent where p.relname = 'positions' order by 1",
      )
    ).map((p) => p.name);

  it("creates today's partition and the next days' ahead of time (the maintenance timer's work)", async () => {
    const store = new PositionStore(storage);
    await store.createAhead(Date.UTC(2027, 0, 10, 12), 3);
    expect(await partitionNames()).toEqual(
      expect.arrayContaining(['positions_p20270110', 'positions_p20270111', 'positions_p20270112', 'positions_p20270113']),
    );
    expect(await partitionNames()).not.toContain('positions_p20270114');
  });

  it("gives each day's partition the indexes the reads use, one BRIN index for received_at and ts (m0034)", async () => {
    const store = new PositionStore(storage);
    await store.createAhead(Date.UTC(2027, 2, 3, 12), 0);
    const indexes = await storage.execute<{ definition: string }>(
      "select regexp_replace(pg_get_indexdef(indexrelid), '^.* USING ', '') as definition from pg_index where indrelid = 'positions_p20270303'::regclass order by 1",
    );
    expect(indexes.map((index) => index.definition)).toEqual([
      'brin (received_at, ts)',
      'btree (organization_id, building_id, ts)',
      'btree (organization_id, device_id, ts)',
    ]);
  });

  it('lets two gateways create the same new days at once, both succeeding', async () => {
    const [one, two] = [new PositionStore(storage), new PositionStore(storage)];
    const days = Array.from({ length: 5 }, (_, i) => at(Date.UTC(2027, 1, 1 + i, 8)));
    await expect(Promise.all([one.ensurePartitions(days), two.ensurePartitions(days), one.ensurePartitions(days)])).resolves.toBeDefined();
    expect(await partitionNames()).toEqual(expect.arrayContaining(['positions_p20270201', 'positions_p20270205']));
  });

  it('never drops, whatever the retention, a partition that could still receive an accepted fix', async () => {
    const store = new PositionStore(storage, undefined, { maxAgeMs: 7 * DAY });
    await store.createAhead(Date.UTC(2027, 2, 1, 12), 4); // 1 to 5 March
    const now = Date.UTC(2027, 2, 11, 12); // a fix from 4 March 12:00 is still accepted
    const dropped = await store.dropPartitionsOlderThan(1, now);
    expect(dropped).toEqual(expect.arrayContaining(['positions_p20270301', 'positions_p20270302']));
    expect(dropped).not.toContain('positions_p20270303');
    expect(await partitionNames()).toEqual(expect.arrayContaining(['positions_p20270303', 'positions_p20270304', 'positions_p20270305']));
  });

  it('when another gateway dropped a partition this one knew of, only the batch for that day fails, and its retry succeeds', async () => {
    const { PositionWriter } = await import('../../shared/positions/position-writer.js');
    const mine = new PositionStore(storage);
    const writer = new PositionWriter(mine);
    const dropped = Date.UTC(2027, 3, 1, 10);
    const kept = Date.UTC(2027, 3, 2, 10);
    await writer.write([at(dropped, 'gone-1'), at(kept, 'kept-1')]);
    await storage.execute('drop table positions_p20270401'); // another gateway's retention, say
    const results = await Promise.allSettled([writer.write([at(dropped, 'gone-2')]), writer.write([at(kept, 'kept-2')])]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    await writer.write([at(dropped, 'gone-2')]); // the app's retry
    const rows = await storage.execute<{ device_id: string }>(
      "select device_id from positions where device_id in ('gone-1', 'gone-2', 'kept-1', 'kept-2') order by 1",
    );
    expect(rows.map((row) => row.device_id)).toEqual(['gone-2', 'kept-1', 'kept-2']);
  });
});
