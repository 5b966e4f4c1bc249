import fc from 'fast-check';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ZoneEventRecord } from '../../shared/detection/zone-event.js';
import { BinaryCopyEncoder } from '../../shared/positions/copy-binary.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { PositionStore } from '../../shared/positions/position-store.js';
import { PositionWriter } from '../../shared/positions/position-writer.js';
import { openStorage, type Storage } from '../../shared/storage/index.js';
import { createTestEnvironment, serverDatabaseUrl, type TestEnvironment } from '../../testkit/test-environment.js';
import { outdoorRecord, positionRecord } from '../../testkit/positions.js';

/** Binary COPY is the server path only: the embedded database keeps the unnest statement (position-store.test.ts). */
describe.skipIf(!serverDatabaseUrl)('binary COPY of positions and zone events (postgres)', () => {
  let environment: TestEnvironment;
  let storage: Storage;
  let client: pg.Client;

  beforeAll(async () => {
    environment = await createTestEnvironment();
    storage = await openStorage(environment.config);
    client = new pg.Client({ connectionString: environment.config.DATABASE_URL });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await storage?.close();
    await environment?.cleanup();
  });

  const copyInto = (sql: string, data: Buffer) =>
    new Promise<void>((resolve, reject) => {
      const stream = client.query(copyFrom(sql));
      stream.on('error', reject);
      stream.on('finish', resolve);
      stream.end(data);
    });

  it('round trip: what the encoder writes, PostgreSQL reads back equal (NULLs, floats, non-ASCII text, ms times, uuids)', async () => {
    await client.query(`create temp table copy_round_trip (n int4, u uuid, t text, i int4, b bool, f float8, ts timestamptz)`);
    const times = [
      Date.UTC(2026, 10, 23, 12, 0, 0, 1),
      Date.UTC(1969, 11, 31, 23, 59, 59, 999),
      Date.UTC(1900, 0, 1),
      Date.UTC(2000, 0, 1),
      Date.UTC(9999, 11, 31, 23, 59, 59, 999),
      8.64e15,
      -1,
    ];
    const rows = times.map((ts, n) => ({
      n,
      u: n % 3 === 0 ? null : crypto.randomUUID(),
      t: n % 4 === 1 ? null : ['plain', 'Zoë 漢字 😀', 'quote " back\\slash, comma', '', 'ümlaut\ttab\nnewline'][n % 5]!,
      i: n % 2 === 0 ? null : [-2147483648, 2147483647, 0, -7][n % 4]!,
      b: n % 3 === 2 ? null : n % 2 === 0,
      f: [null, -1.5e-300, 0.1 + 0.2, -123456.789, 1e308, -0.000001, 42][n]!,
      ts,
    }));
    const copy = new BinaryCopyEncoder(16); // small on purpose: the buffer grows while encoding
    for (const row of rows) {
      copy.row(7);
      copy.int4(row.n);
      copy.uuid(row.u);
      copy.text(row.t);
      copy.int4(row.i);
      copy.bool(row.b);
      copy.float8(row.f);
      copy.timestamptz(row.ts);
    }
    await copyInto('copy copy_round_trip from stdin (format binary)', copy.finish());
    const stored = await client.query<{
      n: number;
      u: string | null;
      t: string | null;
      i: number | null;
      b: boolean | null;
      f: number | null;
      ms: string;
    }>(`select n, u::text as u, t, i, b, f, (extract(epoch from ts) * 1000)::text as ms from copy_round_trip order by n`);
    expect(stored.rows.map(({ ms, ...row }) => ({ ...row, ts: Number(ms) }))).toEqual(rows);
  });

  /** Everything stored by either path, as comparable strings, sorted (rows have no identity). */
  const storedRows = async () => {
    const positions = await storage.execute<Record<string, unknown>>(
      `select organization_id::text as o, device_id, user_id::text as u, building_id, floor_id, indoor, x, y, lat, lng, yaw, accuracy,
              (extract(epoch from ts) * 1000)::text as ts, (extract(epoch from received_at) * 1000)::text as r from positions`,
    );
    const events = await storage.execute<Record<string, unknown>>(
      `select organization_id::text as o, building_id, floor_id, zone_kind, zone_id, device_id, user_id::text as u, type,
              (extract(epoch from at) * 1000)::text as at, (extract(epoch from fired_at) * 1000)::text as f from zone_events`,
    );
    // JSON writes -0 as 0: the text path stores 0 for -0, binary COPY keeps the sign, and both are equal floats.
    return { positions: positions.map((row) => JSON.stringify(row)).sort(), events: events.map((row) => JSON.stringify(row)).sort() };
  };
  const clear = async () => {
    await storage.execute('delete from positions');
    await storage.execute('delete from zone_events');
  };

  it('stores exactly what the unnest statement stores, for random records (property)', async () => {
    // The same storage seen through a plain object: not a ServerStorage, so the store takes the unnest path.
    const unnestView = {
      kind: 'server',
      orm: storage.orm,
      em: () => storage.em(),
      execute: storage.execute.bind(storage),
      executeBound: storage.executeBound.bind(storage),
    } as unknown as Storage;
    const copyStore = new PositionStore(storage);
    const unnestStore = new PositionStore(unnestView);
    const day = Date.UTC(2026, 10, 23);
    await copyStore.ensurePartitions([-1, 0, 1, 2].map((d) => ({ timestamp: day + d * 86_400_000 }) as PositionRecord));
    await unnestStore.ensurePartitions([-1, 0, 1, 2].map((d) => ({ timestamp: day + d * 86_400_000 }) as PositionRecord));
    const text = fc.string({ unit: 'grapheme', maxLength: 24 }).filter((value) => !value.includes('\0'));
    const float = fc.double({ noNaN: true, noDefaultInfinity: true });
    const int4 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
    // The text path's to_timestamp(ms / 1000) is exact to the ms only while seconds stay under 2^32 (until 2106);
    // binary COPY is exact far beyond (see the round trip above), so the paths are compared where both are.
    const time = fc.integer({ min: Date.UTC(1900, 0, 1), max: Date.UTC(2100, 0, 1) });
    const position = fc.record({
      organizationId: fc.uuid(),
      deviceId: text,
      userId: fc.option(fc.uuid()),
      buildingId: fc.option(int4),
      floorId: fc.option(int4),
      indoor: fc.boolean(),
      x: fc.option(float),
      y: fc.option(float),
      lat: float,
      lng: float,
      yaw: float,
      accuracy: fc.option(float),
      // Positions stay within the partitions made above; zone events (not partitioned) range far wider.
      timestamp: fc.integer({ min: day - 86_400_000, max: day + 3 * 86_400_000 - 1 }),
      receivedAt: time,
    }) satisfies fc.Arbitrary<PositionRecord>;
    const zoneEvent = fc.record({
      organizationId: fc.uuid(),
      buildingId: int4,
      floorId: fc.option(int4),
      zoneKind: fc.constantFrom('geofence', 'event', 'conversion') as fc.Arbitrary<ZoneEventRecord['zoneKind']>,
      zoneId: text,
      zoneName: text,
      deviceId: text,
      userId: fc.option(fc.uuid()),
      type: fc.constantFrom('enter', 'exit') as fc.Arbitrary<ZoneEventRecord['type']>,
      at: time,
      firedAt: time,
    }) satisfies fc.Arbitrary<ZoneEventRecord>;
    await fc.assert(
      fc.asyncProperty(fc.array(position, { maxLength: 25 }), fc.array(zoneEvent, { maxLength: 10 }), async (records, zoneEvents) => {
        await clear();
        await copyStore.insert(records, zoneEvents);
        const viaCopy = await storedRows();
        await clear();
        await unnestStore.insert(records, zoneEvents);
        const viaUnnest = await storedRows();
        expect(viaCopy.positions).toHaveLength(records.length);
        expect(viaCopy.events).toHaveLength(zoneEvents.length);
        expect(viaCopy).toEqual(viaUnnest);
      }),
      { seed: 15, numRuns: 60 },
    );
    await clear();
  });

  it('commits positions and zone events together or not at all, and the writer isolates the write the server refuses', async () => {
    const store = new PositionStore(storage);
    const writer = new PositionWriter(store, undefined, 2);
    const now = Date.UTC(2026, 10, 23, 15);
    const organizationId = crypto.randomUUID();
    const at = (deviceId: string) => positionRecord({ organizationId, deviceId, floorId: 2, x: 1, y: 2, accuracy: null, timestamp: now });
    const event = (deviceId: string, zoneKind = 'geofence'): ZoneEventRecord => ({
      organizationId,
      buildingId: 1,
      floorId: 2,
      zoneKind: zoneKind as ZoneEventRecord['zoneKind'],
      zoneId: 'z',
      zoneName: 'Z',
      deviceId,
      userId: null,
      type: 'enter',
      at: now,
      firedAt: now,
    });
    const results = await Promise.allSettled([
      writer.write([at('good-1')], [event('good-1')]),
      // The positions COPY succeeds, then the server refuses this event: the transaction takes both down.
      writer.write([at('bad')], [event('bad', 'bogus')]),
      writer.write([at('good-2')], [event('good-2')]),
      // A malformed uuid fails in the encoder, before anything is sent: isolated the same way.
      writer.write([{ ...at('bad-uuid'), userId: 'not-a-uuid' }]),
    ]);
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected']);
    const devices = async (table: string) =>
      (
        await storage.execute<{ device_id: string }>(`select device_id from ${table} where organization_id = ? order by 1`, [
          organizationId,
        ])
      ).map((row) => row.device_id);
    expect(await devices('positions')).toEqual(['good-1', 'good-2']);
    expect(await devices('zone_events')).toEqual(['good-1', 'good-2']);
  });

  it('survives the server killing its idle writer connections: the next commit opens a new one', async () => {
    const store = new PositionStore(storage);
    const now = Date.UTC(2026, 10, 23, 16);
    const organizationId = crypto.randomUUID();
    const at = (deviceId: string) => outdoorRecord({ organizationId, deviceId, lng: 2, accuracy: 3, timestamp: now });
    await store.insert([at('before')]);
    // Every other backend of this database, the writer pool's idle ones among them (an operator's restart, say).
    await client.query(
      'select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    await store.insert([at('after')]);
    const rows = await client.query<{ device_id: string }>('select device_id from positions where organization_id = $1 order by 1', [
      organizationId,
    ]);
    expect(rows.rows.map((row) => row.device_id)).toEqual(['after', 'before']);
  });

  it('answers an unreachable server as an outage, which the writer rejects at once instead of retrying apart', async () => {
    const { failsEveryBatch } = await import('../../shared/positions/commit-failure.js');
    const { StorageUnavailableError } = await import('../../shared/errors.js');
    const { ServerStorage } = await import('../../shared/storage/server-storage.js');
    const { freePort } = await import('../../testkit/fault-servers.js');
    // A server storage whose writer pool points at a port nobody listens on.
    const writerPool = new pg.Pool({
      host: '127.0.0.1',
      port: await freePort(),
      user: 'nobody',
      database: 'none',
      connectionTimeoutMillis: 1000,
    });
    const unreachable = Object.assign(Object.create(ServerStorage.prototype) as Storage, { writerPool });
    const store = new PositionStore(unreachable);
    const now = Date.UTC(2026, 10, 23, 17);
    const record = outdoorRecord({ organizationId: crypto.randomUUID(), lng: 2, timestamp: now });
    const error = await store.insert([record], [], { createPartitions: false }).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(StorageUnavailableError);
    expect(failsEveryBatch(error)).toBe(true);
    await writerPool.end();
  });
});
