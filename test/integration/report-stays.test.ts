import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csvChunks } from '../../shared/csv/csv.js';
import { createLogger } from '../../shared/logger.js';
import { PositionStore } from '../../shared/positions/position-store.js';
import { materializations } from '../../shared/reports/materializations.js';
import { ReportMaterializer, setWatermark } from '../../shared/reports/materializer.js';
import { reportParamSchemas, type ReportName } from '../../shared/reports/report-params.js';
import { reportQueries } from '../../shared/reports/report-queries.js';
import { UNBOUNDED } from '../../shared/reports/report-sql.js';
import type { Storage } from '../../shared/storage/storage.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, adminClient } from '../../testkit/identity.js';
import { driverLabel, serverRedisUrl } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const T0 = Date.UTC(2026, 2, 10, 10, 0, 0); // 2026-03-10 10:00:00Z, as in reports.test.ts
const s = (seconds: number) => T0 + seconds * 1000;
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
const window = (from: number, to: number) => `from_date=${iso(from)}&to_date=${iso(to)}`;
const GEOFENCE_REPORTS = ['geofencing_sessions_matches', 'geofencing_stay_time'] as const;

/**
 * Geofence reports served from kept stays (shared/reports/stays.ts) give the rows the raw path gives: every
 * report here is asked through the API (stays where they answer, pending device-hours from positions) and
 * computed again in-process on the raw path, in JSON and in CSV. The materializer runs when a test says so.
 */
describe(`geofence reports from kept stays (${driverLabel}, jobs on ${serverRedisUrl ? 'BullMQ workers' : 'the in-process runner'})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let storage: Storage;
  let organizationId: string;
  let materializer: ReportMaterializer;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  let fenceA: { id: string };
  const upload = async (poses: object[]) => {
    for (let i = 0; i < poses.length; i += 1000)
      expect((await admin.post('/api/v1/realtime/positions', { poses: poses.slice(i, i + 1000) })).status).toBe(204);
  };
  const track = (deviceId: string, points: [number, number, number][]) =>
    points.map(([ms, x, y]) => ({
      device_id: deviceId,
      timestamp: ms,
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x,
      y,
    }));
  const every = (from: number, to: number, stepS: number, x: number, y: number): [number, number, number][] =>
    Array.from({ length: Math.floor((to - from) / (stepS * 1000)) + 1 }, (_, i) => [from + i * stepS * 1000, x, y]);
  const fence = async (name: string, body: object) => {
    const response = await admin.post('/api/v1/geofences', { name, building_id: venue.building.id, floor_id: venue.floors[0].id, ...body });
    expect(response.status, response.text).toBe(201);
    return response.body as { id: string };
  };
  /** A materializer pass over everything received so far. */
  const materialize = () => materializer.runOnce(Date.now() + 1);
  const staysCount = async () => Number((await storage.execute<{ n: string }>('select count(*)::int8 as n from geofence_stays'))[0]!.n);

  /** The report through the API (stays path) and on the raw path: identical rows in JSON and CSV. Returns the JSON rows. */
  async function bothWays(name: (typeof GEOFENCE_REPORTS)[number], query: string): Promise<Record<string, unknown>[]> {
    const json = await admin.get(`/api/v1/reports/${name}.json?${query}`);
    expect(json.status, json.text).toBe(200);
    const csv = await admin.get(`/api/v1/reports/${name}.csv?${query}`);
    expect(csv.status, csv.text).toBe(200);
    const params = reportParamSchemas[name as ReportName].parse(
      Object.fromEntries([...new URLSearchParams(query)].map(([key, value]) => [key.replace(/\[\]$/, ''), value])),
    ) as Record<string, unknown>;
    const raw = await reportQueries[name](storage, params, { organizationId }, UNBOUNDED, { raw: true });
    expect(json.body.data.map((row: Record<string, unknown>) => raw.meta.map((column) => row[column.name]))).toEqual(raw.rows);
    let rawCsv = '';
    for await (const chunk of csvChunks(
      raw.meta.map((column) => column.name),
      [raw.rows as never],
    ))
      rawCsv += chunk;
    expect(csv.text).toBe(rawCsv);
    return json.body.data;
  }

  beforeAll(async () => {
    running = await startTestGateway({ POSITIONS_MAX_AGE_SECONDS: String(100 * 365 * 86_400), REPORTS_MATERIALIZE_INTERVAL_MS: '0' });
    admin = await adminClient(running.client);
    storage = running.gateway.services.storage;
    organizationId = (
      await storage.execute<{ organization_id: string }>('select organization_id::text from users where email = ?', [ADMIN_EMAIL])
    )[0]!.organization_id;
    materializer = new ReportMaterializer(storage, materializations, createLogger('warn'), { lagMs: 0 });
    venue = await createVenue(admin, 'Stays venue');
    fenceA = await fence('Fence A', { type: 'POLYGON', cartesians: squareCartesians(10, 10, 10) });
    await fence('Fence B', { type: 'CIRCLE', cartesians: [[45, 15]], radius: 3 });
    // The fixtures of reports.test.ts: crosser 60 s in A then 60 s in B; gappy in A with gaps of 14 s and 16 s.
    await upload(
      track('crosser', [
        ...every(s(0), s(30), 5, 5, 5),
        ...every(s(35), s(95), 5, 15, 15),
        ...every(s(100), s(120), 5, 30, 15),
        ...every(s(125), s(185), 5, 45, 15),
      ]),
    );
    await upload(
      track('gappy', [
        [s(1000), 12, 12],
        [s(1005), 12, 12],
        [s(1010), 12, 12],
        [s(1024), 12, 12],
        [s(1029), 12, 12],
        [s(1045), 12, 12],
        [s(1050), 12, 12],
      ]),
    );
    // long: 20 minutes in A across the 11:00 boundary; hopper: in A every 20 s (over the stored 15 s threshold).
    await upload(track('long', every(s(3000), s(4200), 5, 15, 15)));
    await upload(track('hopper', every(s(5000), s(5400), 20, 16, 16)));
    // Fence backdating: the geofences above took effect "now"; say they existed since the day before.
    await storage.execute('update geofences set geometry_since = ?', [new Date(T0 - 86_400_000).toISOString()]);
    expect(await materialize()).toBeGreaterThan(0);
    expect(await staysCount()).toBeGreaterThan(0);
  });
  afterAll(async () => running?.stop());

  it('the hand-computed fixtures of reports.test.ts through both paths', async () => {
    const day = window(s(-60), s(3600));
    const rows = await bothWays('geofencing_sessions_matches', `${day}&device_ids=crosser,gappy`);
    expect(rows.map((r: any) => [r.device_id, r.geofence_name, r.entered_at, r.exited_at, r.duration_s, r.positions])).toEqual([
      ['crosser', 'Fence A', iso(s(35)), iso(s(95)), 60, 13],
      ['crosser', 'Fence B', iso(s(125)), iso(s(185)), 60, 13],
      ['gappy', 'Fence A', iso(s(1000)), iso(s(1029)), 29, 5],
      ['gappy', 'Fence A', iso(s(1045)), iso(s(1050)), 5, 2],
    ]);
    expect(
      (await bothWays('geofencing_sessions_matches', `${day}&device_ids=gappy&session_threshold=20`)).map((r: any) => r.duration_s),
    ).toEqual([50]);
    expect(
      (await bothWays('geofencing_sessions_matches', `${day}&device_ids=gappy&session_threshold=10`)).map((r: any) => r.duration_s),
    ).toEqual([10, 5, 5]);
    expect(
      (await bothWays('geofencing_sessions_matches', `${day}&device_ids=gappy&session_threshold=0`)).map((r: any) => r.positions),
    ).toEqual([1, 1, 1, 1, 1, 1, 1]);
    expect(
      (await bothWays('geofencing_sessions_matches', `${day}&device_ids=crosser,gappy&min_stay_time=30`)).map((r: any) => r.duration_s),
    ).toEqual([60, 60]);
    await bothWays('geofencing_sessions_matches', `${day}&fence_ids[]=${fenceA.id}`);
    const madrid = await bothWays('geofencing_stay_time', `${day}&device_ids=crosser&time_zone=Europe/Madrid&group=hour`);
    expect(madrid.map((r: any) => [r.group, r.geofence_name, r.stay_time_s, r.first_entry])).toEqual([
      ['2026-03-10 11:00', 'Fence A', 60, '2026-03-10 11:00:35'],
      ['2026-03-10 11:00', 'Fence B', 60, '2026-03-10 11:02:05'],
    ]);
    expect((await bothWays('geofencing_stay_time', `${day}&device_ids=gappy`))[0]).toMatchObject({
      group: '2026-03-10',
      sessions: 2,
      stay_time_s: 34,
    });
  });

  it('reads the kept stays: a tampered segment shows through until a backfill rebuilds it', async () => {
    const query = `${window(s(0), s(3600))}&device_ids=crosser`;
    await storage.execute("update geofence_stays set positions = positions + 1000 where device_id = 'crosser'");
    const tampered = await admin.get(`/api/v1/reports/geofencing_sessions_matches.json?${query}`);
    expect(tampered.body.data.map((r: any) => r.positions)).toEqual([1013, 1013]);
    expect(await materializer.backfill(new Date(s(0)), new Date(s(3600)))).toBeGreaterThan(0);
    expect((await bothWays('geofencing_sessions_matches', query)).map((r: any) => r.positions)).toEqual([13, 13]);
  });

  it('a stay crossing an hour boundary is one row', async () => {
    const rows = await bothWays('geofencing_sessions_matches', `${window(s(0), s(7200))}&device_ids=long`);
    expect(rows.map((r: any) => [r.entered_at, r.exited_at, r.positions])).toEqual([[iso(s(3000)), iso(s(4200)), 241]]);
    await bothWays('geofencing_stay_time', `${window(s(0), s(7200))}&device_ids=long&group=hour`);
  });

  it('stays crossing UTC midnight over several days are one row each: the days read apart are joined', async () => {
    // Segments are read one UTC day at a time (each in order, then merged): a stay across midnight joins its two days.
    const midnight = Date.UTC(2026, 2, 14);
    for (const [device, x] of [
      ['night-b', 15],
      ['night-a', 45],
    ] as const) {
      for (const day of [0, 1, 2])
        await upload(track(device, every(midnight + day * 86_400_000 - 600_000, midnight + day * 86_400_000 + 600_000, 10, x, 15)));
    }
    await materialize();
    const query = `${window(midnight - 86_400_000 + 1800_000, midnight + 3 * 86_400_000)}&device_ids=night-a,night-b`;
    const rows = await bothWays('geofencing_sessions_matches', query);
    expect(rows.map((r: any) => [r.device_id, r.entered_at, r.positions])).toEqual(
      [0, 1, 2].flatMap((day) => ['night-a', 'night-b'].map((device) => [device, iso(midnight + day * 86_400_000 - 600_000), 121])),
    );
    expect(
      (await bothWays('geofencing_stay_time', `${query}&group=day`)).map((r: any) => [r.group, r.device_id, r.sessions, r.stay_time_s]),
    ).toEqual(
      ['2026-03-13', '2026-03-14', '2026-03-15'].flatMap((group) => ['night-a', 'night-b'].map((device) => [group, device, 1, 1200])),
    );
    await bothWays('geofencing_stay_time', `${query}&group=day&time_zone=America/New_York`);
    await bothWays('geofencing_stay_time', `${query}&group=hour&time_zone=Asia/Kathmandu`);
  });

  it('session_threshold larger than the stored one merges segments; smaller takes the raw path', async () => {
    const query = `${window(s(3600), s(7200))}&device_ids=hopper`;
    expect((await bothWays('geofencing_sessions_matches', query)).map((r: any) => r.positions)).toEqual(
      Array.from({ length: 21 }, () => 1),
    );
    expect(
      (await bothWays('geofencing_sessions_matches', `${query}&session_threshold=30`)).map((r: any) => [r.duration_s, r.positions]),
    ).toEqual([[400, 21]]);
    expect((await bothWays('geofencing_sessions_matches', `${query}&session_threshold=20`)).map((r: any) => r.positions)).toEqual([21]);
    expect((await bothWays('geofencing_sessions_matches', `${query}&session_threshold=5`)).map((r: any) => r.positions)).toEqual(
      Array.from({ length: 21 }, () => 1),
    );
  });

  it('a geometry changed mid-window: before the change from positions, after from stays of the new version, one row across it', async () => {
    const changing = await fence('Changing', { type: 'POLYGON', cartesians: squareCartesians(60, 40, 10) });
    const T1 = s(3 * 3600 + 1200); // 13:20Z
    // mover: 90 minutes at (72, 45), outside the first geometry, inside the second; then 20 at (65, 45), inside both.
    await upload(track('mover', [...every(T1 - 1800_000, T1 + 3600_000, 10, 72, 45), ...every(T1 + 3610_000, T1 + 4800_000, 10, 65, 45)]));
    await storage.execute('update geofences set geometry_since = ? where id = ?', [new Date(T0 - 86_400_000).toISOString(), changing.id]);
    await materialize(); // segments of version 1
    const renamed = await admin.patch(`/api/v1/geofences/${changing.id}`, { name: 'Renamed' });
    expect(renamed.status, renamed.text).toBe(200);
    expect((await storage.execute<{ v: number }>('select geometry_version as v from geofences where id = ?', [changing.id]))[0]!.v).toBe(1);
    const moved = await admin.patch(`/api/v1/geofences/${changing.id}`, { cartesians: squareCartesians(55, 35, 20) });
    expect(moved.status, moved.text).toBe(200);
    expect(Object.keys(moved.body)).not.toContain('geometry_version'); // the API's shape is unchanged
    expect((await storage.execute<{ v: number }>('select geometry_version as v from geofences where id = ?', [changing.id]))[0]!.v).toBe(2);
    await storage.execute('update geofences set geometry_since = ? where id = ?', [new Date(T1).toISOString(), changing.id]);
    const query = `${window(s(2 * 3600), s(6 * 3600))}&device_ids=mover`;
    // Segments of version 1 in hours after the change: those device-hours are computed from positions.
    const expected = [['Renamed', iso(T1 - 1800_000), iso(T1 + 4800_000), 661]];
    expect(
      (await bothWays('geofencing_sessions_matches', query)).map((r: any) => [r.geofence_name, r.entered_at, r.exited_at, r.positions]),
    ).toEqual(expected);
    await materializer.backfill(new Date(s(2 * 3600)), new Date(s(6 * 3600))); // segments of version 2
    expect(
      (await bothWays('geofencing_sessions_matches', query)).map((r: any) => [r.geofence_name, r.entered_at, r.exited_at, r.positions]),
    ).toEqual(expected);
    await bothWays('geofencing_stay_time', `${query}&group=hour&time_zone=Europe/Madrid`);
    await admin.delete(`/api/v1/geofences/${changing.id}`);
  });

  it('every kind of shape, overlapping, walked across their edges in small steps: kept stays give the raw rows', async () => {
    // A polygon, a line and a point with capture radii, a circle, overlapping: cells crossing several shapes, each tested exactly.
    const shapes = [
      await fence('Triangle', {
        type: 'POLYGON',
        cartesians: [
          [100, 95],
          [116, 101],
          [101, 109],
          [100, 95],
        ],
      }),
      await fence('Corridor', {
        type: 'LINE',
        cartesians: [
          [98, 100],
          [130, 103],
          [140, 96],
        ],
        radius: 1.5,
      }),
      await fence('Spot', { type: 'POINT', cartesians: [[112, 101]], radius: 2 }),
      await fence('Disc', { type: 'CIRCLE', cartesians: [[125, 100]], radius: 4.5 }),
    ];
    await storage.execute('update geofences set geometry_since = ? where id = any(?::uuid[])', [
      new Date(T0 - 86_400_000).toISOString(),
      `{${shapes.map((f) => f.id).join(',')}}`,
    ]);
    const start = s(5 * 3600); // 15:00Z
    // 0.04 m a second eastwards, wobbling north and south across the edges; a 20 s gap and a 15 s one.
    const walk = Array.from(
      { length: 1200 },
      (_, i) => [start + 60_000 + i * 1000, 96 + i * 0.04, 100 + 3.3 * Math.sin(i / 9)] as [number, number, number],
    );
    await upload(
      track(
        'walker',
        walk.filter((_, i) => (i < 400 || i >= 420) && (i < 800 || i >= 814)),
      ),
    );
    expect(await materialize()).toBeGreaterThan(0); // the walker's device-hour, received after the last pass, is pending until one
    expect(
      Number((await storage.execute<{ n: string }>("select count(*)::int8 as n from geofence_stays where device_id = 'walker'"))[0]!.n),
    ).toBeGreaterThan(10);
    const query = `${window(start, start + 3600_000)}&device_ids=walker`;
    const rows = await bothWays('geofencing_sessions_matches', query);
    expect(new Set(rows.map((r: any) => r.geofence_name))).toEqual(new Set(['Triangle', 'Corridor', 'Spot', 'Disc']));
    expect((await bothWays('geofencing_sessions_matches', `${query}&session_threshold=30`)).length).toBeLessThan(rows.length);
    await bothWays('geofencing_stay_time', `${query}&group=hour`);
    for (const shape of shapes) await admin.delete(`/api/v1/geofences/${shape.id}`);
  });

  it('across the daylight-saving changes of Europe/Madrid (last Sundays of March and October)', async () => {
    for (const [change, first, last] of [
      [Date.UTC(2026, 2, 29, 1), '2026-03-29 01:30:00', '2026-03-29 03:30:00'],
      [Date.UTC(2026, 9, 25, 1), '2026-10-25 02:30:00', '2026-10-25 02:30:00'],
    ] as const) {
      await upload(track('dst', every(change - 1800_000, change + 1800_000, 10, 15, 15)));
      await materialize();
      const query = `${window(change - 3 * 3600_000, change + 3 * 3600_000)}&device_ids=dst&time_zone=Europe/Madrid`;
      expect((await bothWays('geofencing_sessions_matches', query)).map((r: any) => [r.entered_at, r.exited_at, r.duration_s])).toEqual([
        [first, last, 3600],
      ]);
      // Grouped by the local hour and day the stay began (the groups are placed by instant in PostgreSQL).
      expect((await bothWays('geofencing_stay_time', `${query}&group=hour`)).map((r: any) => [r.group, r.stay_time_s])).toEqual([
        [`${first.slice(0, 13)}:00`, 3600],
      ]);
      expect((await bothWays('geofencing_stay_time', query)).map((r: any) => r.group)).toEqual([first.slice(0, 10)]);
    }
  });

  it('backfill builds stays for positions stored behind the watermark', async () => {
    const day = Date.UTC(2026, 2, 12, 10);
    await upload(track('anchor', [[day, 1, 1]])); // creates the day's partition
    await materialize();
    // Imported straight into the table, received long ago: behind the watermark, so no pass sees them.
    await storage.execute(
      `insert into positions (organization_id, device_id, building_id, floor_id, indoor, x, y, lat, lng, ts, received_at)
       select ?, 'imported', ?, ?, true, 15, 15, 40.4, -3.7, ?::timestamptz + g * interval '5 seconds', ?::timestamptz from generate_series(0, 60) g`,
      [organizationId, venue.building.id, venue.floors[0].id, new Date(day).toISOString(), new Date(day + 3600_000).toISOString()],
    );
    const query = `${window(day - 3600_000, day + 3 * 3600_000)}&device_ids=imported`;
    const before = await admin.get(`/api/v1/reports/geofencing_sessions_matches.json?${query}`);
    expect(before.body.data).toEqual([]); // what backfill is for
    expect(await materializer.backfill(new Date(day - 3600_000), new Date(day + 3 * 3600_000))).toBeGreaterThan(0);
    expect((await bothWays('geofencing_sessions_matches', query)).map((r: any) => [r.duration_s, r.positions])).toEqual([[300, 61]]);
  });

  it('a late (back-dated) position makes its device-hour pending: the report matches raw before and after the next pass', async () => {
    await upload(
      track('late', [
        [s(1000), 12, 12],
        [s(1020), 12, 12],
      ]),
    );
    await materialize();
    const query = `${window(s(0), s(3600))}&device_ids=late`;
    expect((await bothWays('geofencing_sessions_matches', query)).map((r: any) => r.positions)).toEqual([1, 1]);
    await upload(track('late', [[s(1010), 12, 12]])); // joins the two
    expect((await bothWays('geofencing_sessions_matches', query)).map((r: any) => r.positions)).toEqual([3]);
    await materialize();
    expect((await bothWays('geofencing_sessions_matches', query)).map((r: any) => r.positions)).toEqual([3]);
  });

  it('keeps an open hour pending (read from positions) and rebuilds it once, when it has closed', async () => {
    const hourStart = (ms: number) => Math.floor(ms / 3_600_000) * 3_600_000;
    if (Date.now() - hourStart(Date.now()) < 5000) await new Promise((resolve) => setTimeout(resolve, 5000));
    const hour = hourStart(Date.now());
    const first = Math.max(hour, Date.now() - 60_000);
    await upload(track('open-hour', every(first, first + 4000, 2, 12, 12)));
    const kept = async () =>
      Number((await storage.execute<{ n: string }>("select count(*)::int8 as n from geofence_stays where device_id = 'open-hour'"))[0]!.n);
    const query = `${window(hour, hour + 3_600_000)}&device_ids=open-hour`;
    await materialize();
    expect(await kept()).toBe(0); // the hour is still open: not rebuilt at every pass
    expect((await bothWays('geofencing_sessions_matches', query)).map((r: any) => r.positions)).toEqual([3]);
    await materializer.runOnce(hour + 3_600_000 + 1); // the hour has closed
    expect(await kept()).toBe(1);
    expect((await bothWays('geofencing_sessions_matches', query)).map((r: any) => r.positions)).toEqual([3]);
    await setWatermark(storage, new Date()); // back from the future: later rows are pending again
  });

  it('retention drops stays with their positions', async () => {
    const hourOf = async (before: number) =>
      Number(
        (
          await storage.execute<{ n: string }>('select count(*)::int8 as n from geofence_stays where hour < ?', [
            new Date(before).toISOString(),
          ])
        )[0]!.n,
      );
    const cutoff = Date.UTC(2026, 2, 11);
    expect(await hourOf(cutoff)).toBeGreaterThan(0);
    const store = new PositionStore(storage, createLogger('warn'));
    const dropped = await store.dropPartitionsOlderThan(1, cutoff + 86_400_000);
    expect(dropped).toContain('positions_p20260310');
    expect(await hourOf(cutoff)).toBe(0);
    expect(await staysCount()).toBeGreaterThan(0); // later days kept
  });
});
