import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeGeohash } from '../../shared/geo/geohash.js';
import { REPORT_NAMES } from '../../shared/reports/report-params.js';
import { DocumentValidator } from '../contract/schema-validator.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser } from '../../testkit/identity.js';
import { driverLabel, serverRedisUrl } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const T0 = Date.UTC(2026, 2, 10, 10, 0, 0); // 2026-03-10 10:00:00Z, 11:00 in Madrid (winter time)
const s = (seconds: number) => T0 + seconds * 1000;
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
const window = `from_date=${iso(s(-60))}&to_date=${iso(s(3600))}`;

/** Parses an RFC 4180 document (quoted fields, doubled quotes, CRLF) into rows of strings. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (field += '"'), i++;
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') row.push(field), (field = '');
    else if (c === '\r' && text[i + 1] === '\n') row.push(field), rows.push(row), (row = []), (field = ''), i++;
    else field += c;
  }
  if (field !== '' || row.length > 0) row.push(field), rows.push(row);
  return rows;
}

describe(`reports (${driverLabel}, jobs on ${serverRedisUrl ? 'BullMQ workers' : 'the in-process runner'})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  let fenceA: { id: string };
  let fenceB: { id: string };
  const upload = async (poses: object[]) => {
    for (let i = 0; i < poses.length; i += 1000)
      expect((await admin.post('/api/v1/realtime/positions', { poses: poses.slice(i, i + 1000) })).status).toBe(204);
  };
  const track = (deviceId: string, points: [number, number, number][], floor = 0) =>
    points.map(([second, x, y]) => ({
      device_id: deviceId,
      timestamp: s(second),
      building_id: venue.building.id,
      floor_id: venue.floors[floor].id,
      x,
      y,
    }));
  const every = (from: number, to: number, step: number, x: number, y: number): [number, number, number][] =>
    Array.from({ length: Math.floor((to - from) / step) + 1 }, (_, i) => [from + i * step, x, y]);
  const report = (name: string, query: string) => admin.get(`/api/v1/reports/${name}?${query}`);

  beforeAll(async () => {
    // The fixtures are fixed dates (March 2026, 1971), far older than the 7 days uploads accept by default.
    running = await startTestGateway({ POSITIONS_MAX_AGE_SECONDS: String(100 * 365 * 86_400) });
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Report venue');
    fenceA = (
      await admin.post('/api/v1/geofences', {
        name: 'Fence A',
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'POLYGON',
        cartesians: squareCartesians(10, 10, 10),
      })
    ).body;
    fenceB = (
      await admin.post('/api/v1/geofences', {
        name: 'Fence B',
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'CIRCLE',
        cartesians: [[45, 15]],
        radius: 3,
      })
    ).body;
    // crosser: outside, 60 s in A, outside, 60 s in B (a fix every 5 s).
    await upload(
      track('crosser', [
        ...every(0, 30, 5, 5, 5),
        ...every(35, 95, 5, 15, 15),
        ...every(100, 120, 5, 30, 15),
        ...every(125, 185, 5, 45, 15),
      ]),
    );
    // gappy in A: a gap of 14 s (kept), then of 16 s (a new session) with the default 15 s threshold.
    await upload(
      track('gappy', [
        [1000, 12, 12],
        [1005, 12, 12],
        [1010, 12, 12],
        [1024, 12, 12],
        [1029, 12, 12],
        [1045, 12, 12],
        [1050, 12, 12],
      ]),
    );
  });
  afterAll(async () => running?.stop());

  it('answers each JSON report with rows the OpenAPI document types column by column (issue 29)', async () => {
    const document = (await admin.get('/api/v1/openapi.json')).body;
    const validator = new DocumentValidator(document);
    const building = venue.building.id;
    const extra: Record<string, string> = {
      visitors: `&building_id=${building}`,
      positioning_time: `&building_id=${building}`,
      heatmap: `&building_id=${building}&floor_id=${venue.floors[0].id}`,
      user_positions: '&device_id=crosser',
    };
    for (const name of REPORT_NAMES) {
      const schema = document.paths[`/api/v1/reports/${name}.json`].get.responses['200'].content['application/json'].schema;
      for (const zone of ['UTC', 'Europe/Madrid']) {
        const response = await report(`${name}.json`, `${window}&time_zone=${zone}${extra[name] ?? ''}`);
        expect(response.status, `${name}: ${response.text}`).toBe(200);
        expect(response.body.data.length, name).toBeGreaterThan(0);
        // A stated row, not an open map: its properties are the report's columns, every one present.
        const names = response.body.meta.map((column: { name: string }) => column.name);
        const row = schema.properties.data.items;
        expect(Object.keys(row.properties ?? {}), name).toEqual(names);
        expect([...(row.required ?? [])].sort(), name).toEqual([...names].sort());
        expect(validator.errors(schema, response.body), `${name} in ${zone}`).toEqual([]);
      }
    }
  });

  it('geofencing_sessions_matches: each stay with entry, exit and duration, from positions', async () => {
    const response = await report('geofencing_sessions_matches.json', `${window}&device_ids=crosser,gappy`);
    expect(response.status, response.text).toBe(200);
    const rows = response.body.data.map((r: any) => [r.device_id, r.geofence_name, r.entered_at, r.exited_at, r.duration_s, r.positions]);
    expect(rows).toEqual([
      ['crosser', 'Fence A', iso(s(35)), iso(s(95)), 60, 13],
      ['crosser', 'Fence B', iso(s(125)), iso(s(185)), 60, 13],
      ['gappy', 'Fence A', iso(s(1000)), iso(s(1029)), 29, 5],
      ['gappy', 'Fence A', iso(s(1045)), iso(s(1050)), 5, 2],
    ]);
    expect(response.body.meta.map((m: { name: string }) => m.name)).toEqual([
      'device_id',
      'user_id',
      'geofence_id',
      'geofence_name',
      'entered_at',
      'exited_at',
      'duration_s',
      'positions',
    ]);
    expect(response.body.meta.find((m: { name: string }) => m.name === 'user_id')).toEqual({
      name: 'user_id',
      type: 'string',
      nullable: true,
    });
    expect(response.body.statistics).toMatchObject({ rows_returned: 4, rows_read: 33 });
  });

  it('session_threshold decides where a gap splits a stay; min/max_stay_time and fence_ids filter', async () => {
    const wider = await report('geofencing_sessions_matches.json', `${window}&device_ids=gappy&session_threshold=20`);
    expect(wider.body.data.map((r: any) => r.duration_s)).toEqual([50]);
    const narrower = await report('geofencing_sessions_matches.json', `${window}&device_ids=gappy&session_threshold=10`);
    expect(narrower.body.data.map((r: any) => r.duration_s)).toEqual([10, 5, 5]);
    const long = await report('geofencing_sessions_matches.json', `${window}&min_stay_time=30`);
    expect(long.body.data.map((r: any) => r.duration_s)).toEqual([60, 60]);
    const onlyB = await report('geofencing_sessions_matches.json', `${window}&fence_ids[]=${fenceB.id}`);
    expect(onlyB.body.data.map((r: any) => r.geofence_id)).toEqual([fenceB.id]);
  });

  it('is computed against the current geometry, so it covers periods before a geofence existed', async () => {
    const late = (
      await admin.post('/api/v1/geofences', {
        name: 'Late fence',
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'POLYGON',
        cartesians: squareCartesians(29, 14, 2),
      })
    ).body;
    const response = await report('geofencing_sessions_matches.json', `${window}&fence_ids=${late.id}`);
    expect(response.body.data.map((r: any) => [r.device_id, r.duration_s])).toEqual([['crosser', 20]]);
    await admin.delete(`/api/v1/geofences/${late.id}`);
  });

  it('geofencing_stay_time: stay per day (or hour) and fence, local times without offset in another time zone', async () => {
    const response = await report('geofencing_stay_time.json', `${window}&device_ids=crosser&time_zone=Europe/Madrid&group=hour`);
    expect(response.status, response.text).toBe(200);
    expect(response.body.data).toEqual([
      {
        group: '2026-03-10 11:00',
        device_id: 'crosser',
        user_id: null,
        geofence_id: fenceA.id,
        geofence_name: 'Fence A',
        sessions: 1,
        stay_time_s: 60,
        first_entry: '2026-03-10 11:00:35',
        last_exit: '2026-03-10 11:01:35',
      },
      {
        group: '2026-03-10 11:00',
        device_id: 'crosser',
        user_id: null,
        geofence_id: fenceB.id,
        geofence_name: 'Fence B',
        sessions: 1,
        stay_time_s: 60,
        first_entry: '2026-03-10 11:02:05',
        last_exit: '2026-03-10 11:03:05',
      },
    ]);
    const gappy = await report('geofencing_stay_time.json', `${window}&device_ids=gappy`);
    expect(gappy.body.data).toHaveLength(1);
    expect(gappy.body.data[0]).toMatchObject({ group: '2026-03-10', sessions: 2, stay_time_s: 34 });
  });

  it('serves the same report as RFC 4180 CSV with the statistics in X-Db-Statistics', async () => {
    const response = await admin.get(`/api/v1/reports/geofencing_sessions_matches.csv?${window}&device_ids=crosser`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/csv');
    expect(JSON.parse(response.headers.get('x-db-statistics')!)).toMatchObject({ rows_returned: 2, rows_read: 26 });
    const rows = parseCsv(response.text);
    expect(rows[0]).toEqual(['device_id', 'user_id', 'geofence_id', 'geofence_name', 'entered_at', 'exited_at', 'duration_s', 'positions']);
    expect(rows.slice(1)).toEqual([
      ['crosser', '', fenceA.id, 'Fence A', iso(s(35)), iso(s(95)), '60', '13'],
      ['crosser', '', fenceB.id, 'Fence B', iso(s(125)), iso(s(185)), '60', '13'],
    ]);
  });

  it('neutralises CSV cells a spreadsheet would run as formulas', async () => {
    await upload(track('=HYPERLINK("x")', [[2000, 1, 1]]));
    const response = await admin.get(`/api/v1/reports/raw_data.csv?${window}&device_ids=${encodeURIComponent('=HYPERLINK("x")')}`);
    const rows = parseCsv(response.text);
    expect(rows[1]![1]).toBe(`'=HYPERLINK("x")`);
  });

  it('visitors: unique visitors once per group, in the local day or hour, across a daylight-saving change', async () => {
    // Madrid moves from +01:00 to +02:00 at 2026-03-29 01:00Z.
    const dst = (isoTime: string, deviceId: string) => ({
      device_id: deviceId,
      timestamp: isoTime,
      building_id: venue.building.id,
      floor_id: venue.floors[1].id,
      x: 5,
      y: 5,
    });
    await upload([
      dst('2026-03-28T23:30:00Z', 'night-1'), // 00:30 on the 29th in Madrid, the 28th in UTC
      dst('2026-03-28T23:31:00Z', 'night-1'),
      dst('2026-03-29T00:30:00Z', 'night-2'), // 01:30 Madrid, before the change
      dst('2026-03-29T01:30:00Z', 'night-3'), // 03:30 Madrid, after it (02:xx does not exist)
      dst('2026-03-29T01:40:00Z', 'night-3'),
    ]);
    const dstWindow = `from_date=2026-03-28T12:00:00Z&to_date=2026-03-29T12:00:00Z&building_id=${venue.building.id}&floor_id=${venue.floors[1].id}`;
    const utcDays = await report('visitors.json', `${dstWindow}&group=day`);
    expect(utcDays.body.data.map((r: any) => [r.group, r.visitors])).toEqual([
      ['2026-03-28', 1],
      ['2026-03-29', 2],
    ]);
    const madridDays = await report('visitors.json', `${dstWindow}&group=day&time_zone=Europe/Madrid`);
    expect(madridDays.body.data.map((r: any) => [r.group, r.visitors, r.positions])).toEqual([['2026-03-29', 3, 5]]);
    const madridHours = await report('visitors.json', `${dstWindow}&group=hour&time_zone=Europe/Madrid`);
    expect(madridHours.body.data.map((r: any) => [r.group, r.visitors])).toEqual([
      ['2026-03-29 00:00', 1],
      ['2026-03-29 01:00', 1],
      ['2026-03-29 03:00', 1],
    ]);
  });

  it('visitors: a zone whose offset is not whole quarter hours (Monrovia, -00:44:30 until 1972) splits its days exactly', async () => {
    const at = (isoTime: string, deviceId: string) => ({
      device_id: deviceId,
      timestamp: isoTime,
      building_id: venue.building.id,
      floor_id: venue.floors[1].id,
      x: 5,
      y: 5,
    });
    // Local midnight of 1971-06-01 is 00:44:30Z: one fix just before it, one just after, in the same UTC quarter hour.
    await upload([at('1971-06-01T00:44:00Z', 'monrovia-1'), at('1971-06-01T00:44:45Z', 'monrovia-2')]);
    const query = `from_date=1971-05-31T12:00:00Z&to_date=1971-06-01T12:00:00Z&building_id=${venue.building.id}&floor_id=${venue.floors[1].id}&time_zone=Africa/Monrovia`;
    const days = await report('visitors.json', `${query}&group=day`);
    expect(days.status, days.text).toBe(200);
    expect(days.body.data.map((r: any) => [r.group, r.visitors])).toEqual([
      ['1971-05-31', 1],
      ['1971-06-01', 1],
    ]);
  });

  it('heatmap: the north pole and the antimeridian fall in the last geohash cell, as in a geohash', async () => {
    const edge = { device_id: 'edge-tag', building_id: venue.building.id, lat: 90, lng: 180 };
    await upload([
      { ...edge, timestamp: s(7000) },
      { ...edge, timestamp: s(7001), lat: 89.9999999 },
    ]);
    const query = `from_date=${iso(s(6990))}&to_date=${iso(s(7010))}&building_id=${venue.building.id}&floor_id=${venue.floors[0].id}&position_type=outdoor&device_id=edge-tag`;
    const heat = await report('heatmap.json', query);
    expect(heat.status, heat.text).toBe(200);
    expect(heat.body.data.map((r: any) => [r.geohash, r.weight, r.positions])).toEqual([[encodeGeohash(90, 180, 10), 1, 2]]);
  });

  it('visitors and heatmap count a user carrying two devices once', async () => {
    const carrier = await createUser(admin, 'user');
    const at = (deviceId: string) => ({
      device_id: deviceId,
      user_id: carrier.user.id,
      timestamp: s(5000),
      building_id: venue.building.id,
      floor_id: venue.floors[1].id,
      x: 70,
      y: 70,
    });
    await upload([at('carrier-phone'), at('carrier-watch')]);
    const query = `from_date=${iso(s(4990))}&to_date=${iso(s(5010))}&building_id=${venue.building.id}&floor_id=${venue.floors[1].id}`;
    const visitors = await report('visitors.json', `${query}&group=hour`);
    expect(visitors.body.data.map((r: any) => [r.visitors, r.devices, r.positions])).toEqual([[1, 2, 2]]);
    const heat = await report('heatmap.json', query);
    expect(heat.body.data.map((r: any) => [r.weight, r.positions])).toEqual([[1, 2]]);
  });

  it('positioning_time: per-device time in the building, then min, average, percentiles and max per group', async () => {
    const response = await report('positioning_time.json', `${window}&building_id=${venue.building.id}&group=day`);
    expect(response.status, response.text).toBe(200);
    // crosser: one session 0..185 s; gappy: 1000..1029 (29 s) + 1045..1050 (5 s) = 34 s; plus the formula device (0 s).
    const [row] = response.body.data;
    expect(row).toMatchObject({ group: '2026-03-10', devices: 3, sessions: 4, total_time_s: 219, min_s: 0, max_s: 185 });
    expect(row.avg_s).toBeCloseTo(73, 5);
    expect(row.p50_s).toBe(34);
    const byWeekday = await report('positioning_time.json', `${window}&building_id=${venue.building.id}`);
    expect(byWeekday.body.data[0].group).toBe('Tuesday');
  });

  it('heatmap: geohash-10 cells of a floor with centre and a weight of distinct users', async () => {
    const response = await report(
      'heatmap.json',
      `${window}&building_id=${venue.building.id}&floor_id=${venue.floors[0].id}&position_type=indoor&device_id=crosser`,
    );
    expect(response.status, response.text).toBe(200);
    const cells = response.body.data;
    expect(cells.every((cell: any) => cell.geohash.length === 10 && cell.weight === 1)).toBe(true);
    expect(cells.reduce((sum: number, cell: any) => sum + cell.positions, 0)).toBe(7 + 13 + 5 + 13);
    for (const cell of cells) expect(encodeGeohash(cell.lat, cell.lng, 10)).toBe(cell.geohash);
  });

  it('raw_data and user_positions: ordered rows, limit, session marks', async () => {
    const raw = await report('raw_data.json', `${window}&device_ids=gappy&order_by=timestamp&order_direction=desc&limit=3`);
    expect(raw.body.data.map((r: any) => r.timestamp)).toEqual([iso(s(1050)), iso(s(1045)), iso(s(1029))]);
    expect(raw.body.data[0]).toMatchObject({ device_id: 'gappy', x: 12, y: 12, indoor: true, building_id: venue.building.id });
    const trajectory = await report('user_positions.json', `${window}&device_id=gappy`);
    expect(trajectory.body.data.map((r: any) => r.session_mark)).toEqual([1, 1, 1, 1, 1, 2, 2]);
    // gappy's gaps are 5, 5, 14, 5, 16, 5 s: a gap equal to the threshold stays in the session.
    for (const [threshold, marks] of [
      ['4.999', [1, 2, 3, 4, 5, 6, 7]],
      ['5', [1, 1, 1, 2, 2, 3, 3]],
      ['14', [1, 1, 1, 1, 1, 2, 2]],
      ['16', [1, 1, 1, 1, 1, 1, 1]],
    ] as const) {
      const marked = await report('user_positions.json', `${window}&device_id=gappy&session_threshold=${threshold}`);
      expect(
        marked.body.data.map((r: any) => r.session_mark),
        threshold,
      ).toEqual(marks);
    }
    expect(Object.keys(trajectory.body.data[0]).sort()).toEqual([
      'device_id',
      'floor_id',
      'lat',
      'lng',
      'session_mark',
      'timestamp',
      'user_id',
    ]);
  });

  it('refuses a window wider than REPORTS_MAX_WINDOW_DAYS (31 by default) with 422 naming to_date, and takes one exactly that wide', async () => {
    const day = 86_400_000;
    for (const name of ['visitors.json', 'raw_data.csv', 'geofencing_sessions_matches.json']) {
      const wide = await report(name, `from_date=${iso(s(0))}&to_date=${iso(s(0) + 31 * day + 1000)}&building_id=${venue.building.id}`);
      expect(wide.status, `${name}: ${wide.text}`).toBe(422);
      expect(wide.body.errors.map((e: { field: string }) => e.field)).toEqual(['query.to_date']);
    }
    const widest = await report('visitors.json', `from_date=${iso(s(0))}&to_date=${iso(s(0) + 31 * day)}&building_id=${venue.building.id}`);
    expect(widest.status, widest.text).toBe(200);
  });

  it('refuses bad parameters with 422 naming them', async () => {
    for (const [query, field] of [
      [`to_date=${iso(s(10))}`, 'query.from_date'],
      [`${window}&building_ids=`, 'query.building_ids'],
      [`${window}&time_zone=Mars/Olympus`, 'query.time_zone'],
      [`${window}&group=week`, 'query.group'],
    ] as const) {
      const response = await report('geofencing_stay_time.json', query);
      expect(response.status, query).toBe(422);
      expect(response.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    const backwards = await report('visitors.json', `from_date=${iso(s(10))}&to_date=${iso(s(0))}&building_id=${venue.building.id}`);
    expect(backwards.status).toBe(422);
    expect(backwards.body.errors[0].field).toBe('to_date');
    expect((await admin.get(`/api/v1/reports/nonsense.json?${window}`)).status).toBe(404);
  });

  it('geofence shapes: overlapping polygons, a point and a line with capture radius, boundaries included', async () => {
    const fence = async (name: string, body: object) =>
      (await admin.post('/api/v1/geofences', { name, building_id: venue.building.id, floor_id: venue.floors[0].id, ...body })).body as {
        id: string;
      };
    const inner = await fence('Inner', { type: 'POLYGON', cartesians: squareCartesians(12, 12, 4) }); // inside Fence A
    const line = await fence('Line', {
      type: 'LINE',
      cartesians: [
        [60, 10],
        [70, 10],
        [70, 20],
      ],
      radius: 1.5,
    });
    const point = await fence('Point', { type: 'POINT', cartesians: [[80, 10]] }); // default capture radius: 1 m
    await upload(
      track('shapes', [
        [2000, 14, 14],
        [2005, 16, 14],
        [2010, 18, 14],
        [2015, 65, 11],
        [2020, 71.4, 15],
        [2025, 80.9, 10],
        [2030, 82, 10],
      ]),
    );
    const response = await report(
      'geofencing_sessions_matches.json',
      `${window}&device_ids=shapes&fence_ids=${[fenceA.id, inner.id, line.id, point.id].join(',')}`,
    );
    expect(response.status, response.text).toBe(200);
    const rows = response.body.data
      .map((r: any) => [r.geofence_name, r.entered_at, r.exited_at, r.positions])
      .sort((a: string[], b: string[]) => (a[0]! < b[0]! ? -1 : 1));
    expect(rows).toEqual([
      ['Fence A', iso(s(2000)), iso(s(2010)), 3],
      ['Inner', iso(s(2000)), iso(s(2005)), 2], // (16, 14) is on its edge
      ['Line', iso(s(2015)), iso(s(2020)), 2], // 1 m from the first segment, 1.4 m from the second
      ['Point', iso(s(2025)), iso(s(2025)), 1], // 0.9 m away; (82, 10) is 2 m away
    ]);
    for (const { id } of [inner, line, point]) await admin.delete(`/api/v1/geofences/${id}`);
  });

  it('session_threshold 0 makes every instant its own stay', async () => {
    const response = await report('geofencing_sessions_matches.json', `${window}&device_ids=gappy&session_threshold=0`);
    expect(response.body.data.map((r: any) => [r.duration_s, r.positions])).toEqual(Array.from({ length: 7 }, () => [0, 1]));
  });

  it('counts a fix uploaded twice as stored, in stays as in the raw data', async () => {
    await upload(
      track('twice', [
        [3000, 18, 18],
        [3005, 18, 18],
      ]),
    );
    await upload(track('twice', [[3005, 18, 18]]));
    expect((await report('raw_data.json', `${window}&device_ids=twice`)).body.data).toHaveLength(3);
    const response = await report('geofencing_sessions_matches.json', `${window}&device_ids=twice`);
    expect(response.body.data.map((r: any) => [r.geofence_name, r.duration_s, r.positions])).toEqual([['Fence A', 5, 3]]);
  });

  it('shows a plain user only their own positions', async () => {
    const walker = await createUser(admin, 'user');
    await upload([
      {
        device_id: 'own-phone',
        user_id: walker.user.id,
        timestamp: s(3000),
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        x: 15,
        y: 15,
      },
    ]);
    const response = await walker.client.get(`/api/v1/reports/raw_data.json?${window}`);
    expect(response.status).toBe(200);
    expect(response.body.data.map((r: any) => r.device_id)).toEqual(['own-phone']);
  });
});
