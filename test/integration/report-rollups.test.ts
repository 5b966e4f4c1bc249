import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csvChunks } from '../../shared/csv/csv.js';
import { PositionStore } from '../../shared/positions/position-store.js';
import { encodeGeohash } from '../../shared/geo/geohash.js';
import { setWatermark, type DeviceHour } from '../../shared/reports/materializer.js';
import { reportParamSchemas, type ReportScope } from '../../shared/reports/report-params.js';
import { reportQueries, type QueryResult } from '../../shared/reports/report-queries.js';
import { inBoundedTransaction, UNBOUNDED } from '../../shared/reports/report-sql.js';
import { QUARTER_MS, rollupMaterialization, RollupWindow } from '../../shared/reports/rollups.js';
import type { Storage } from '../../shared/storage/storage.js';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

type RollupReport = 'visitors' | 'positioning_time' | 'heatmap';

const T0 = Date.UTC(2026, 2, 10, 10, 0, 0); // as in reports.test.ts: 2026-03-10 10:00:00Z
const s = (seconds: number) => T0 + seconds * 1000;
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
const window = { from_date: iso(s(-60)), to_date: iso(s(3600)) };

/** A report as the route serves it: the JSON body's data and meta, the CSV document, and rows_read. */
async function rendered(result: QueryResult) {
  let csv = '';
  for await (const chunk of csvChunks(
    result.meta.map((column) => column.name),
    [result.rows as never],
  ))
    csv += chunk;
  const data = result.rows.map((row) => Object.fromEntries(result.meta.map((column, i) => [column.name, row[i]])));
  return { json: JSON.stringify({ data, meta: result.meta }), csv, rowsRead: result.rowsRead };
}

/** A seeded generator, so the walks are the same on every run and both drivers. */
function lcg(seed: number) {
  let state = seed >>> 0;
  return () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

describe(`report rollups: one answer from rollups and from positions (${driverLabel})`, () => {
  let running: RunningGateway;
  let storage: Storage;
  let admin: TestClient;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  /** A second building for the walks, so that the hand-computed fixtures of the first keep their numbers. */
  let walkVenue: Awaited<ReturnType<typeof createVenue>>;
  let scope: ReportScope;
  let carrierId: string;
  const upload = async (poses: object[]) => {
    for (let i = 0; i < poses.length; i += 1000)
      expect((await admin.post('/api/v1/realtime/positions', { poses: poses.slice(i, i + 1000) })).status).toBe(204);
  };
  const at = (deviceId: string, timestamp: number | string, floor: 0 | 1 = 0, x = 5, y = 5, userId?: string, place = venue) => ({
    device_id: deviceId,
    timestamp,
    building_id: place.building.id,
    floor_id: place.floors[floor].id,
    x,
    y,
    ...(userId ? { user_id: userId } : {}),
  });
  const every = (deviceId: string, from: number, to: number, step: number, x: number, y: number) =>
    Array.from({ length: Math.floor((to - from) / step) + 1 }, (_, i) => at(deviceId, s(from + i * step), 0, x, y));
  /** A walk from `from` to `to` (ms): gaps of 0.5 to 25 s, floor changes, a user on some devices. */
  const walk = (deviceId: string, from: number, to: number, seed: number, userId?: string) => {
    const random = lcg(seed);
    const poses: object[] = [];
    for (let t = from; t < to; t += Math.round(500 + random() * random() * 24_500)) {
      poses.push(at(deviceId, t, random() < 0.8 ? 0 : 1, 2 + random() * 110, 2 + random() * 70, userId, walkVenue));
    }
    return poses;
  };

  /** Every device-hour with positions, rebuilt in one transaction; the watermark then says all is materialised. */
  const rebuildAll = async () => {
    const rows = await storage.execute<{ organization_id: string; device_id: string; hour_ms: string }>(
      `select distinct organization_id, device_id, (extract(epoch from date_bin('1 hour', ts, '2000-01-01T00:00:00Z')) * 1000)::int8 as hour_ms from positions`,
    );
    const units: DeviceHour[] = rows.map((row) => ({
      organizationId: row.organization_id,
      deviceId: row.device_id,
      hour: new Date(Number(row.hour_ms)),
    }));
    await inBoundedTransaction(storage, UNBOUNDED, (execute) => rollupMaterialization.rebuild(execute, units));
    await setWatermark(storage, new Date());
    return units.length;
  };

  /** Runs a report from positions only and as served (rollups where they can), expects the same JSON, CSV and rows_read, and returns the data. */
  const bothWays = async (name: RollupReport, query: Record<string, unknown>, who: ReportScope = scope) => {
    const params = reportParamSchemas[name].parse(query) as Record<string, unknown>;
    const raw = await rendered(await reportQueries[name](storage, params, who, UNBOUNDED, { raw: true }));
    const served = await rendered(await reportQueries[name](storage, params, who));
    expect(served, `${name} ${JSON.stringify(query)}`).toEqual(raw);
    return JSON.parse(served.json).data as Record<string, any>[];
  };

  beforeAll(async () => {
    running = await startTestGateway({ POSITIONS_MAX_AGE_SECONDS: String(100 * 365 * 86_400), REPORTS_MATERIALIZE_INTERVAL_MS: '0' });
    storage = running.gateway.services.storage;
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Rollup venue');
    walkVenue = await createVenue(admin, 'Walk venue');
    scope = { organizationId: (await admin.get('/api/v1/organizations/current_organization')).body.id };
    carrierId = (await createUser(admin, 'user')).user.id;
    // The hand-computed fixtures of reports.test.ts for visitors, positioning_time and heatmap.
    await upload([
      ...every('crosser', 0, 30, 5, 5, 5),
      ...every('crosser', 35, 95, 5, 15, 15),
      ...every('crosser', 100, 120, 5, 30, 15),
      ...every('crosser', 125, 185, 5, 45, 15),
    ]);
    await upload([1000, 1005, 1010, 1024, 1029, 1045, 1050].map((second) => at('gappy', s(second), 0, 12, 12)));
    await upload([at('=HYPERLINK("x")', s(2000), 0, 1, 1)]);
    await upload([
      at('night-1', '2026-03-28T23:30:00Z', 1), // 00:30 on the 29th in Madrid, the 28th in UTC
      at('night-1', '2026-03-28T23:31:00Z', 1),
      at('night-2', '2026-03-29T00:30:00Z', 1), // 01:30 Madrid, before the change
      at('night-3', '2026-03-29T01:30:00Z', 1), // 03:30 Madrid, after it
      at('night-3', '2026-03-29T01:40:00Z', 1),
    ]);
    await upload([at('monrovia-1', '1971-06-01T00:44:00Z', 1), at('monrovia-2', '1971-06-01T00:44:45Z', 1)]);
    const edge = { device_id: 'edge-tag', building_id: venue.building.id, lat: 90, lng: 180 };
    await upload([
      { ...edge, timestamp: s(7000) },
      { ...edge, timestamp: s(7001), lat: 89.9999999 },
    ]);
    await upload([at('carrier-phone', s(5000), 1, 70, 70, carrierId), at('carrier-watch', s(5000), 1, 70, 70, carrierId)]);
    // Walks across quarter and hour edges: T0's morning; both daylight-saving changes of Madrid (last Sundays of
    // March and October, at 01:00Z); the local midnights of Kathmandu (+05:45, 18:15Z) and Kolkata (+05:30, 18:30Z);
    // a month of sparse fixes; the turn of 1980.
    const hour = 3_600_000;
    const march = Date.parse('2026-03-29T01:00:00Z');
    const october = Date.parse('2026-10-25T01:00:00Z');
    const midnight = Date.parse('2026-03-09T18:15:00Z');
    await upload([
      ...walk('walker-a', s(-1800), s(4000), 1, carrierId),
      ...walk('walker-b', s(-100), s(3000), 2),
      ...walk('walker-b', s(-90_000), s(-80_000), 10),
      // The same instants on both floors: runs that tie on first and last fix.
      ...[0, 3, 3, 20, 41, 41.5].flatMap((second) =>
        [0, 1].map((floor) => at('twin', s(-85_000 + second), floor as 0 | 1, 20, 20, undefined, walkVenue)),
      ),
      ...walk('walker-a', march - 2 * hour, march + 2 * hour, 3, carrierId),
      ...walk('walker-c', march - 1.5 * hour, march + 1.2 * hour, 4),
      ...walk('walker-a', october - 2 * hour, october + 2 * hour, 5, carrierId),
      ...walk('walker-c', october - 1.5 * hour, october + 1.5 * hour, 6),
      ...walk('walker-b', midnight - 0.5 * hour, midnight + 0.6 * hour, 7),
      ...walk('walker-b', midnight + 24 * hour - 0.5 * hour, midnight + 24 * hour + 0.6 * hour, 8),
      ...walk('walker-c', Date.parse('1979-12-31T23:30:00Z'), Date.parse('1980-01-01T00:40:00Z'), 9),
      ...Array.from({ length: 120 }, (_, i) =>
        at(
          'sparse',
          Date.parse('2026-03-01T00:00:00Z') + i * 6.2 * hour + (i % 7) * 997,
          (i % 3 === 0 ? 1 : 0) as 0 | 1,
          10 + (i % 11),
          10 + (i % 5),
          undefined,
          walkVenue,
        ),
      ),
    ]);
  }, 120_000);
  afterAll(async () => {
    await setWatermark(storage, null);
    await running?.stop();
  });

  it('serves the hand-computed fixtures of reports.test.ts from the rollups, as positions do', async () => {
    expect(await rebuildAll()).toBeGreaterThan(10);
    const [{ n }] = await storage.execute<{ n: number }>('select count(*)::int as n from rollup_runs');
    expect(n).toBeGreaterThan(0);
    const building = { building_id: venue.building.id };

    const positioning = await bothWays('positioning_time', { ...window, ...building, group: 'day' });
    // crosser: one session 0..185 s; gappy: 1000..1029 (29 s) + 1045..1050 (5 s) = 34 s; plus the formula device (0 s).
    expect(positioning[0]).toMatchObject({
      group: '2026-03-10',
      devices: 3,
      sessions: 4,
      total_time_s: 219,
      min_s: 0,
      max_s: 185,
      p50_s: 34,
    });
    expect(positioning[0]!.avg_s).toBeCloseTo(73, 5);
    expect((await bothWays('positioning_time', { ...window, ...building }))[0]!.group).toBe('Tuesday');

    const dst = { from_date: '2026-03-28T12:00:00Z', to_date: '2026-03-29T12:00:00Z', ...building, floor_id: venue.floors[1].id };
    expect((await bothWays('visitors', { ...dst, group: 'day' })).map((r) => [r.group, r.visitors])).toEqual([
      ['2026-03-28', 1],
      ['2026-03-29', 2],
    ]);
    expect(
      (await bothWays('visitors', { ...dst, group: 'day', time_zone: 'Europe/Madrid' })).map((r) => [r.group, r.visitors, r.positions]),
    ).toEqual([['2026-03-29', 3, 5]]);
    const madridHours = await bothWays('visitors', { ...dst, group: 'hour', time_zone: 'Europe/Madrid' });
    expect(madridHours.map((r) => [r.group, r.visitors])).toEqual([
      ['2026-03-29 00:00', 1],
      ['2026-03-29 01:00', 1],
      ['2026-03-29 03:00', 1],
    ]);

    const monrovia = await bothWays('visitors', {
      from_date: '1971-05-31T12:00:00Z',
      to_date: '1971-06-01T12:00:00Z',
      ...building,
      floor_id: venue.floors[1].id,
      time_zone: 'Africa/Monrovia',
      group: 'day',
    });
    expect(monrovia.map((r) => [r.group, r.visitors])).toEqual([
      ['1971-05-31', 1],
      ['1971-06-01', 1],
    ]);

    const pole = await bothWays('heatmap', {
      from_date: iso(s(6990)),
      to_date: iso(s(7010)),
      ...building,
      floor_id: venue.floors[0].id,
      position_type: 'outdoor',
      device_id: 'edge-tag',
    });
    expect(pole.map((r) => [r.geohash, r.weight, r.positions])).toEqual([[encodeGeohash(90, 180, 10), 1, 2]]);

    const twoDevices = { from_date: iso(s(4990)), to_date: iso(s(5010)), ...building, floor_id: venue.floors[1].id };
    expect((await bothWays('visitors', { ...twoDevices, group: 'hour' })).map((r) => [r.visitors, r.devices, r.positions])).toEqual([
      [1, 2, 2],
    ]);
    expect((await bothWays('heatmap', twoDevices)).map((r) => [r.weight, r.positions])).toEqual([[1, 2]]);

    const crosserCells = await bothWays('heatmap', {
      ...window,
      ...building,
      floor_id: venue.floors[0].id,
      position_type: 'indoor',
      device_id: 'crosser',
    });
    expect(crosserCells.reduce((sum, cell) => sum + cell.positions, 0)).toBe(7 + 13 + 5 + 13);
  });

  it('gives the same rows whichever path, over ragged, daylight-saving, :45 and :30 zone, pre-1980 and month windows', async () => {
    await rebuildAll();
    // Each window with the zones it is about (all of them would take minutes on embedded storage).
    const windows: [{ from_date: string; to_date: string }, string[]][] = [
      [window, ['UTC', 'Asia/Kathmandu']],
      [{ from_date: iso(s(-90_000 + 17)), to_date: iso(s(-80_000 - 1)) }, ['UTC']],
      [{ from_date: '2026-03-28T22:07:30Z', to_date: '2026-03-29T03:52:10.5Z' }, ['Europe/Madrid']],
      [{ from_date: '2026-10-24T22:00:00Z', to_date: '2026-10-25T05:00:00Z' }, ['Europe/Madrid']],
      [{ from_date: '2026-03-09T18:15:00Z', to_date: '2026-03-10T18:15:00Z' }, ['Asia/Kathmandu']],
      [{ from_date: '2026-03-09T18:30:00Z', to_date: '2026-03-10T18:30:00Z' }, ['Asia/Kolkata']],
      [{ from_date: '1979-12-31T23:00:00Z', to_date: '1980-01-01T02:00:00Z' }, ['UTC', 'Africa/Monrovia']],
      [{ from_date: '2026-03-01T00:00:00Z', to_date: '2026-04-01T00:00:00Z' }, ['Europe/Madrid']],
    ];
    let rows = 0;
    for (const place of [venue, walkVenue])
      for (const [span, zones] of windows) {
        const building = place.building.id;
        for (const time_zone of zones) {
          for (const group of ['month', 'day', 'hour']) {
            rows += (await bothWays('visitors', { ...span, building_id: building, group, time_zone })).length;
            rows += (await bothWays('visitors', { ...span, building_id: building, floor_id: place.floors[0].id, group, time_zone })).length;
          }
          for (const group of ['month', 'day', 'hour', 'day_of_week']) {
            for (const session_threshold of group === 'hour' ? ['15', '5', '7.5', '60', '4.999'] : ['15']) {
              rows += (await bothWays('positioning_time', { ...span, building_id: building, group, time_zone, session_threshold })).length;
            }
          }
          rows += (
            await bothWays('positioning_time', { ...span, building_id: building, floor_id: place.floors[1].id, group: 'hour', time_zone })
          ).length;
          rows += (
            await bothWays(
              'positioning_time',
              { ...span, building_id: building, group: 'day', time_zone },
              { ...scope, onlyUserId: carrierId },
            )
          ).length;
        }
        for (const floor of place.floors) {
          for (const position_type of [undefined, 'indoor', 'outdoor']) {
            rows += (
              await bothWays('heatmap', { ...span, building_id: building, floor_id: floor.id, ...(position_type ? { position_type } : {}) })
            ).length;
          }
          rows += (await bothWays('heatmap', { ...span, building_id: building, floor_id: floor.id, user_id: carrierId })).length;
          rows += (await bothWays('heatmap', { ...span, building_id: building, floor_id: floor.id, device_id: 'walker-c' })).length;
        }
      }
    expect(rows).toBeGreaterThan(500);
  }, 300_000);

  it('visitors: a change of offset off a quarter hour (Goose Bay changed at 00:01 local until 2011) splits its hours and days exactly', async () => {
    // 1987-04-05 04:01Z: 00:01 becomes 01:01; 1987-10-25 03:01Z: 00:01 becomes 23:01 the day before. Each pair shares a UTC quarter hour.
    await upload([
      at('goose-1', '1987-04-05T04:00:30Z', 1),
      at('goose-2', '1987-04-05T04:05:00Z', 1),
      at('goose-1', '1987-10-25T03:00:30Z', 1),
      at('goose-2', '1987-10-25T03:05:00Z', 1),
    ]);
    await rebuildAll();
    const goose = { building_id: venue.building.id, floor_id: venue.floors[1].id, time_zone: 'America/Goose_Bay' };
    const spring = await bothWays('visitors', {
      ...goose,
      from_date: '1987-04-05T03:00:00Z',
      to_date: '1987-04-05T05:00:00Z',
      group: 'hour',
    });
    expect(spring.map((r) => [r.group, r.visitors])).toEqual([
      ['1987-04-05 00:00', 1],
      ['1987-04-05 01:00', 1],
    ]);
    const autumn = await bothWays('visitors', {
      ...goose,
      from_date: '1987-10-24T12:00:00Z',
      to_date: '1987-10-25T12:00:00Z',
      group: 'day',
    });
    expect(autumn.map((r) => [r.group, r.visitors])).toEqual([
      ['1987-10-24', 1],
      ['1987-10-25', 1],
    ]);
  });

  it('reads the rollups: a position stored but never rebuilt is missing there, pending ones come from positions', async () => {
    await rebuildAll();
    const query = {
      from_date: '2026-03-28T22:00:00Z',
      to_date: '2026-03-29T04:00:00Z',
      building_id: venue.building.id,
      group: 'hour',
      time_zone: 'Europe/Madrid',
    };
    const params = reportParamSchemas.visitors.parse(query) as Record<string, unknown>;
    const served = async () => (await rendered(await reportQueries.visitors(storage, params, scope))).json;
    const before = await served();
    // Received before the watermark but never rebuilt (what a materializer that skipped it would leave): the served path does not see it.
    await storage.execute(
      `insert into positions (organization_id, device_id, building_id, floor_id, indoor, lat, lng, ts, received_at) values (?, 'unseen', ?, ?, true, 40.4168, -3.7038, '2026-03-29T00:20:00Z', '2001-01-01T00:00:00Z')`,
      [scope.organizationId, venue.building.id, venue.floors[0].id],
    );
    expect(await served()).toBe(before);
    const raw = (await rendered(await reportQueries.visitors(storage, params, scope, UNBOUNDED, { raw: true }))).json;
    expect(raw).not.toBe(before);
    for (const [name, other] of [
      ['positioning_time', { ...query, group: 'hour' }],
      ['heatmap', { ...query, floor_id: venue.floors[0].id }],
    ] as const) {
      const otherParams = reportParamSchemas[name].parse(other) as Record<string, unknown>;
      const both = [
        await reportQueries[name](storage, otherParams, scope),
        await reportQueries[name](storage, otherParams, scope, UNBOUNDED, { raw: true }),
      ];
      expect(both[0].rowsRead, name).toBe(both[1].rowsRead - 1);
    }
    // A late, back-dated fix (received after the watermark): its device-hour is pending, so read from positions.
    await new Promise((resolve) => setTimeout(resolve, 5));
    await upload([
      at('walker-c', '2026-03-29T00:20:00.500Z', 1, 33, 33, undefined, walkVenue),
      at('late-comer', '2026-03-29T00:21:00Z', 0, 40, 40),
    ]);
    await storage.execute(`delete from positions where device_id = 'unseen'`);
    const walks = { ...query, building_id: walkVenue.building.id };
    await bothWays('visitors', walks);
    await bothWays('positioning_time', walks);
    await bothWays('heatmap', { ...walks, floor_id: walkVenue.floors[1].id });
    expect((await bothWays('visitors', { ...query, group: 'day' }))[0]!.devices).toBe(4); // night-1, -2 and -3, and the late-comer
  });

  it('reads hours not closed at the watermark as a range of positions: all pending (before the first pass) is the plain raw path', async () => {
    await rebuildAll();
    const from = '2026-03-28T22:07:30Z';
    const to = '2026-03-29T03:52:10.5Z';
    const plan = () =>
      inBoundedTransaction(storage, UNBOUNDED, (execute) => RollupWindow.plan(execute, scope.organizationId, from, to, QUARTER_MS));
    const everyReport = async () => {
      const rows: Record<string, any>[][] = [];
      for (const place of [venue, walkVenue]) {
        const span = { from_date: from, to_date: to, building_id: place.building.id, time_zone: 'Europe/Madrid' };
        rows.push(await bothWays('visitors', { ...span, group: 'hour' }));
        rows.push(await bothWays('positioning_time', { ...span, group: 'hour' }));
        for (const floor of place.floors) rows.push(await bothWays('heatmap', { ...span, floor_id: floor.id }));
      }
      return rows;
    };
    const served = await everyReport();
    expect(served.flat().length).toBeGreaterThan(10);
    // The watermark inside the window: its hour and those after are pending whole, read by time, not device by device.
    await setWatermark(storage, new Date('2026-03-29T01:30:00Z'));
    const partly = await plan();
    expect(partly).toMatchObject({ innerFrom: '2026-03-28T22:15:00.000Z', innerTo: '2026-03-29T01:00:00.000Z' });
    // The fixtures were received after it (now): the closed hours before it are pending device by device.
    expect(partly!.pending.length).toBeGreaterThan(0);
    expect(partly!.pending.every((unit) => unit.hour.getTime() < Date.parse(partly!.innerTo))).toBe(true);
    expect(await everyReport()).toEqual(served);
    // Before the first pass every hour is pending: no rollup is read, whatever is kept (here: all of it).
    await setWatermark(storage, null);
    expect(await plan()).toBeNull();
    expect(await everyReport()).toEqual(served);
    await setWatermark(storage, new Date());
  });

  it('reads a window with more late device-hours than index scans pay for (one per hour of it, at least 16) from positions only', async () => {
    await upload(Array.from({ length: 20 }, (_, i) => at(`late-${i}`, Date.parse('2026-05-01T10:30:00Z') + i * 1000, 0, 10 + i, 10)));
    await rebuildAll();
    const span = { from_date: '2026-05-01T10:00:00Z', to_date: '2026-05-01T11:00:00Z', building_id: venue.building.id };
    const plan = () =>
      inBoundedTransaction(storage, UNBOUNDED, (execute) =>
        RollupWindow.plan(execute, scope.organizationId, span.from_date, span.to_date, QUARTER_MS),
      );
    expect((await plan())?.pending).toEqual([]);
    const served = [
      await bothWays('visitors', { ...span, group: 'hour' }),
      await bothWays('positioning_time', span),
      await bothWays('heatmap', { ...span, floor_id: venue.floors[0].id }),
    ];
    expect(served[0]).toMatchObject([{ visitors: 20, positions: 20 }]);
    // Received after this watermark, their hour closed before it: 20 late device-hours in a one-hour window.
    await setWatermark(storage, new Date('2026-05-02T00:00:00Z'));
    expect(await plan()).toBeNull();
    expect([
      await bothWays('visitors', { ...span, group: 'hour' }),
      await bothWays('positioning_time', span),
      await bothWays('heatmap', { ...span, floor_id: venue.floors[0].id }),
    ]).toEqual(served);
    await setWatermark(storage, new Date());
  });

  it("serves the same rows over HTTP, on this run's job driver", async () => {
    await rebuildAll();
    const query = {
      from_date: '2026-10-24T22:00:00Z',
      to_date: '2026-10-25T05:00:00Z',
      building_id: String(walkVenue.building.id),
      group: 'hour',
      time_zone: 'Europe/Madrid',
    };
    const direct = await bothWays('positioning_time', query);
    const response = await admin.get(`/api/v1/reports/positioning_time.json?${new URLSearchParams(query)}`);
    expect(response.status, response.text).toBe(200);
    expect(response.body.data).toEqual(direct);
    expect(direct.length).toBeGreaterThan(0);
  });

  it('retention drops the rollups with the position partitions they came from', async () => {
    await rebuildAll();
    const count = async (before: string) =>
      (
        await storage.execute<{ n: number }>(
          `select (select count(*) from rollup_runs where quarter < ?) + (select count(*) from rollup_heat_cells where hour < ?) as n`,
          [before, before],
        )
      )[0]!.n;
    expect(Number(await count('1981-01-01T00:00:00Z'))).toBeGreaterThan(0);
    const dropped = await new PositionStore(storage).dropPartitionsOlderThan(1, Date.UTC(1985, 0, 1));
    expect(dropped.length).toBeGreaterThan(0);
    expect(Number(await count('1984-12-31T00:00:00Z'))).toBe(0);
    expect(Number(await count('2030-01-01T00:00:00Z'))).toBeGreaterThan(0);
  });
});
