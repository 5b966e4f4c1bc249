import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../gateway/auth/principal.js';
import { HistoryService } from '../../gateway/history/history-service.js';
import { ValidationError } from '../../shared/errors.js';
import { PositionHistory } from '../../shared/positions/position-history.js';
import { createVenue } from '../../testkit/cartography.js';
import { parseCsv } from '../../testkit/csv.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createOrganization, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const DAY = 86_400_000;
/** A whole UTC day a few days back: inside retention, never in the future. */
const D = Math.floor((Date.now() - 4 * DAY) / DAY) * DAY;
const dayOf = (epochMs: number) => new Date(epochMs).toISOString().slice(0, 10);
const [dayD, dayD1, dayD2] = [dayOf(D), dayOf(D + DAY), dayOf(D + 2 * DAY)];
const at = (hours: number, minutes = 0) => D + (hours * 60 + minutes) * 60_000;

type Venue = Awaited<ReturnType<typeof createVenue>>;

const upload = async (client: TestClient, poses: object[]) => {
  const response = await client.post('/api/v1/realtime/positions', { poses });
  expect(response.status, response.text).toBe(204);
};
const indoor = (venue: Venue, deviceId: string, timestamp: number | string, x: number, y: number, extra: object = {}) => ({
  device_id: deviceId,
  timestamp,
  building_id: venue.building.id,
  floor_id: venue.floors[0].id,
  x,
  y,
  yaw: 0.5,
  accuracy: 1.5,
  ...extra,
});
const query = (params: Record<string, string | number | undefined>) =>
  new URLSearchParams(
    Object.entries(params)
      .filter((entry): entry is [string, string | number] => entry[1] !== undefined)
      .map(([k, v]) => [k, String(v)]),
  ).toString();
const rawPoseData = (
  client: TestClient,
  params: Record<string, string | number | undefined>,
  path = '/api/v1/real_time/analytics/raw_pose_data',
) => client.get(`${path}?${query(params)}`);
const exportCsv = (client: TestClient, buildingId: number, params: Record<string, string | number | undefined>) =>
  client.get(`/api/v1/real_time/export/${buildingId}?${query(params)}`);
const fieldsOf = (response: { body: { errors?: { field: string }[] } }) => (response.body.errors ?? []).map((error) => error.field);

describe(`positions history: raw_pose_data and CSV export (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let organizationId: string;

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    organizationId = (await admin.get('/api/v1/organizations/current_organization')).body.id;
  });
  afterAll(async () => running?.stop());

  describe('JSON', () => {
    let venue: Venue;
    beforeAll(async () => {
      venue = await createVenue(admin, 'History JSON venue');
      // Out of order on purpose, two devices sharing one timestamp, and one outdoor fix inside the outline.
      await upload(admin, [
        indoor(venue, 'hist-b', at(9), 3, 4, { yaw: 1.25 }),
        indoor(venue, 'hist-a', at(9), 1, 2),
        indoor(venue, 'hist-a', at(8), 5, 6),
        indoor(venue, 'hist-a', new Date(at(8, 30)).toISOString().replace('Z', '+00:00'), 7, 8),
        {
          device_id: 'hist-walker',
          timestamp: at(8, 45),
          building_id: venue.building.id,
          lat: venue.building.location.lat,
          lng: venue.building.location.lng,
        },
      ]);
    });

    it('answers {analytics} with the spec’s fields, indoor fixes only, ordered by time then device, in the offset of date', async () => {
      const response = await rawPoseData(admin, { building_id: venue.building.id, date: `${dayD}T00:00:00.000+05:30` });
      expect(response.status, response.text).toBe(200);
      const floor = venue.floors[0].id;
      expect(response.body).toEqual({
        analytics: [
          { device_id: 'hist-a', floor_id: floor, position: [5, 6], yaw: 0.5, time_sec: `${dayD}T13:30:00.000+05:30` },
          { device_id: 'hist-a', floor_id: floor, position: [7, 8], yaw: 0.5, time_sec: `${dayD}T14:00:00.000+05:30` },
          { device_id: 'hist-a', floor_id: floor, position: [1, 2], yaw: 0.5, time_sec: `${dayD}T14:30:00.000+05:30` },
          { device_id: 'hist-b', floor_id: floor, position: [3, 4], yaw: 1.25, time_sec: `${dayD}T14:30:00.000+05:30` },
        ],
      });
    });

    it('answers the same on the alias without real_time, which the OpenAPI document does not list', async () => {
      const params = { building_id: venue.building.id, date: `${dayD}T00:00:00.000+05:30` };
      const main = await rawPoseData(admin, params);
      const alias = await rawPoseData(admin, params, '/api/v1/analytics/raw_pose_data');
      expect(alias.status).toBe(200);
      expect(alias.body).toEqual(main.body);
      const paths = Object.keys((await admin.get('/api/v1/openapi.json')).body.paths);
      expect(paths).toContain('/api/v1/real_time/analytics/raw_pose_data');
      expect(paths).toContain('/api/v1/real_time/export/{building_id}');
      expect(paths).not.toContain('/api/v1/analytics/raw_pose_data');
    });

    it('filters one device', async () => {
      const response = await rawPoseData(admin, { building_id: venue.building.id, date: `${dayD}T00:00:00.000Z`, device_id: 'hist-b' });
      expect(response.status).toBe(200);
      expect(
        response.body.analytics.map((record: { device_id: string; position: number[] }) => [record.device_id, record.position]),
      ).toEqual([['hist-b', [3, 4]]]);
      const nobody = await rawPoseData(admin, { building_id: venue.building.id, date: `${dayD}T00:00:00.000Z`, device_id: 'hist-nobody' });
      expect(nobody.body).toEqual({ analytics: [] });
    });

    it('refuses, naming the range, more positions than one JSON answer may hold', async () => {
      const principal: Principal = {
        userId: 'n/a',
        email: 'n/a',
        organizationId,
        role: 'admin',
        platformAdmin: false,
        permission: 'read-write',
        via: 'jwt',
      };
      const window = { from: D, to: D + DAY, offsetMinutes: 0 };
      const small = new HistoryService(running.gateway.services.storage, running.gateway.services.cartography, {
        maxJsonRows: 3,
        pageSize: 2,
      });
      const refused = await small.analytics(principal, venue.building.id, window).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(ValidationError);
      expect((refused as ValidationError).errors![0]!.field).toBe('query.date_end');
      expect((refused as ValidationError).errors![0]!.message).toContain(`/api/v1/real_time/export/${venue.building.id}`);
      const enough = new HistoryService(running.gateway.services.storage, running.gateway.services.cartography, {
        maxJsonRows: 4,
        pageSize: 2,
      });
      expect((await enough.analytics(principal, venue.building.id, window)).analytics).toHaveLength(4);
    });
  });

  describe('time zones', () => {
    let venue: Venue;
    const analyticsTimes = async (params: Record<string, string>) => {
      const response = await rawPoseData(admin, { building_id: venue.building.id, ...params });
      expect(response.status, response.text).toBe(200);
      return response.body.analytics.map((record: { time_sec: string }) => record.time_sec);
    };
    beforeAll(async () => {
      venue = await createVenue(admin, 'History time-zone venue');
      await upload(admin, [indoor(venue, 'night', at(21, 30), 1, 1), indoor(venue, 'night', at(22, 30), 2, 2)]);
    });

    it('renders a fix at 22:30Z asked in +02:00 as 00:30 the next day, and the day of date is the day in that offset', async () => {
      expect(await analyticsTimes({ date: `${dayD1}T00:00:00.000+02:00` })).toEqual([`${dayD1}T00:30:00.000+02:00`]);
      expect(await analyticsTimes({ date: `${dayD}T00:00:00.000+02:00` })).toEqual([`${dayD}T23:30:00.000+02:00`]);
      expect(await analyticsTimes({ date: `${dayD}T00:00:00.000Z` })).toEqual([`${dayD}T21:30:00.000+00:00`, `${dayD}T22:30:00.000+00:00`]);
    });

    it('assumes +02:00 when date has no offset, and reads a + sent unencoded (a space) as +', async () => {
      expect(await analyticsTimes({ date: `${dayD1}T00:00:00.000` })).toEqual([`${dayD1}T00:30:00.000+02:00`]);
      const unencoded = await admin.get(
        `/api/v1/real_time/analytics/raw_pose_data?building_id=${venue.building.id}&date=${dayD1}T00:00:00.000+02:00`,
      );
      expect(unencoded.body.analytics.map((record: { time_sec: string }) => record.time_sec)).toEqual([`${dayD1}T00:30:00.000+02:00`]);
    });

    it('takes date_end as the exclusive end of a range of several days', async () => {
      expect(await analyticsTimes({ date: `${dayD}T00:00:00.000+02:00`, date_end: `${dayD2}T00:00:00.000+02:00` })).toEqual([
        `${dayD}T23:30:00.000+02:00`,
        `${dayD1}T00:30:00.000+02:00`,
      ]);
      expect(await analyticsTimes({ date: `${dayD}T00:00:00.000+02:00`, date_end: `${dayD1}T00:30:00.000+02:00` })).toEqual([
        `${dayD}T23:30:00.000+02:00`,
      ]);
      // date_end in another offset is the same instant; times stay in the offset of date.
      expect(await analyticsTimes({ date: `${dayD}T00:00:00.000+02:00`, date_end: `${dayD}T22:30:00.001Z` })).toEqual([
        `${dayD}T23:30:00.000+02:00`,
        `${dayD1}T00:30:00.000+02:00`,
      ]);
    });
  });

  describe('CSV export', () => {
    let venue: Venue;
    beforeAll(async () => {
      venue = await createVenue(admin, 'History CSV venue');
      await upload(admin, [
        indoor(venue, '=cmd()', at(10), 1.5, 2.25),
        indoor(venue, 'a,"b"', at(10, 1), 3, 4),
        indoor(venue, '@SUM(1+1)', at(10, 2), 5, 6),
        indoor(venue, 'plain', at(10, 3), 7, 8),
        {
          device_id: 'plain',
          timestamp: at(10, 4),
          building_id: venue.building.id,
          lat: venue.building.location.lat,
          lng: venue.building.location.lng,
        },
      ]);
    });

    it('streams the spec’s header and one row per fix, quoted per RFC 4180 and with formulas neutralised', async () => {
      const response = await exportCsv(admin, venue.building.id, { date: `${dayD}T00:00:00.000+05:30` });
      expect(response.status, response.text).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/csv; charset=utf-8');
      expect(response.headers.get('content-disposition')).toBe(`attachment; filename="positions-${venue.building.id}-${dayD}.csv"`);
      const records = parseCsv(response.text);
      expect(records[0]).toEqual(['device_id', 'time_sec', 'is_indoor', 'floor_id', 'position_x', 'position_y', 'yaw', 'lat', 'lng']);
      const floor = String(venue.floors[0].id);
      expect(records.slice(1).map((record) => record.slice(0, 7))).toEqual([
        ["'=cmd()", `${dayD}T15:30:00.000+05:30`, 'true', floor, '1.5', '2.25', '0.5'],
        ['a,"b"', `${dayD}T15:31:00.000+05:30`, 'true', floor, '3', '4', '0.5'],
        ["'@SUM(1+1)", `${dayD}T15:32:00.000+05:30`, 'true', floor, '5', '6', '0.5'],
        ['plain', `${dayD}T15:33:00.000+05:30`, 'true', floor, '7', '8', '0.5'],
        ['plain', `${dayD}T15:34:00.000+05:30`, 'false', '', '', '', '0'],
      ]);
      for (const record of records.slice(1)) {
        expect(Math.abs(Number(record[7]) - venue.building.location.lat)).toBeLessThan(0.01);
        expect(Math.abs(Number(record[8]) - venue.building.location.lng)).toBeLessThan(0.01);
      }
      expect(records[5]!.slice(7)).toEqual([String(venue.building.location.lat), String(venue.building.location.lng)]);
      // The raw bytes: quotes doubled inside a quoted field, CRLF line ends, no line a spreadsheet would run.
      expect(response.text).toContain('\r\n"a,""b""",');
      expect(response.text.split('\r\n').filter((line) => /^[=+\-@]/.test(line))).toEqual([]);
    });

    it('filters one device and the range, and names the local day of date in the file name', async () => {
      const response = await exportCsv(admin, venue.building.id, { date: `${dayD}T07:00:00.000-03:00`, device_id: 'plain' });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-disposition')).toBe(`attachment; filename="positions-${venue.building.id}-${dayD}.csv"`);
      expect(
        parseCsv(response.text)
          .slice(1)
          .map((record) => record[1]),
      ).toEqual([`${dayD}T07:03:00.000-03:00`, `${dayD}T07:04:00.000-03:00`]);
      const before = await exportCsv(admin, venue.building.id, { date: `${dayD}T00:00:00.000Z`, date_end: `${dayD}T10:00:00.000Z` });
      expect(before.text).toBe('device_id,time_sec,is_indoor,floor_id,position_x,position_y,yaw,lat,lng\r\n');
    });

    it('streams a large export complete and in order (20,000 rows over several pages, many sharing a timestamp)', async () => {
      const big = await createVenue(admin, 'History big venue');
      const base = at(6);
      // x numbers the rows, kept within the 10 km an indoor fix may lie from its building.
      const poses = Array.from({ length: 20_000 }, (_, i) =>
        indoor(big, `bulk-${i % 4}`, base + Math.floor(i / 4) * 1000, i % 10_000, 1 + Math.floor(i / 10_000)),
      );
      for (let start = 0; start < poses.length; start += 5000) await upload(admin, poses.slice(start, start + 5000));
      const response = await exportCsv(admin, big.building.id, { date: `${dayD}T00:00:00.000Z` });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-length')).toBeNull(); // sent as it is produced, not measured first
      const rows = parseCsv(response.text).slice(1);
      expect(rows).toHaveLength(20_000);
      // Row i is pose i: ordered by time, then device, each exactly once.
      const mismatches = rows.filter(
        (row, i) =>
          row[0] !== `bulk-${i % 4}` ||
          row[4] !== String(i % 10_000) ||
          row[5] !== String(1 + Math.floor(i / 10_000)) ||
          row[1] !== new Date(base + Math.floor(i / 4) * 1000).toISOString().replace('Z', '+00:00'),
      );
      expect(mismatches.slice(0, 3)).toEqual([]);
    });

    it('keeps fixes of one device sharing a timestamp across page boundaries (keyset tie-break)', async () => {
      const twins = await createVenue(admin, 'History twins venue');
      // Seven fixes at one instant (more than two pages), then two later ones.
      await upload(admin, [
        ...Array.from({ length: 7 }, (_, i) => indoor(twins, 'twin', at(12), i, 0)),
        indoor(twins, 'twin', at(12, 1), 7, 0),
        indoor(twins, 'other', at(12, 2), 8, 0),
      ]);
      const reader = new PositionHistory(running.gateway.services.storage, 3);
      const pages: number[][] = [];
      for await (const page of reader.pages({ organizationId, buildingId: twins.building.id, from: D, to: D + DAY }))
        pages.push(page.map((row) => row.x!));
      expect(pages.map((page) => page.length)).toEqual([3, 3, 3]);
      expect(pages.flat().slice(0, 7).sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
      expect(pages.flat().slice(7)).toEqual([7, 8]);
    });
  });

  describe('access', () => {
    let venue: Venue;
    beforeAll(async () => {
      venue = await createVenue(admin, 'History access venue');
    });

    it('answers 404 for a building of another organization, on every history route', async () => {
      await upload(admin, [indoor(venue, 'secret-tag', at(11), 1, 1)]);
      const { client: intruder } = await createOrganization(admin);
      const params = { building_id: venue.building.id, date: `${dayD}T00:00:00.000Z` };
      for (const response of [
        await rawPoseData(intruder, params),
        await rawPoseData(intruder, params, '/api/v1/analytics/raw_pose_data'),
        await exportCsv(intruder, venue.building.id, { date: params.date }),
      ]) {
        expect(response.status, response.text).toBe(404);
        expect(response.text).not.toContain('secret-tag');
      }
      expect((await rawPoseData(admin, params)).body.analytics).toHaveLength(1);
    });

    it('shows a user only their own positions; admins see everyone’s', async () => {
      const member = await createUser(admin, 'user');
      await upload(member.client, [indoor(venue, 'member-phone', at(13), 1, 1)]);
      await upload(admin, [indoor(venue, 'staff-tag', at(13, 1), 2, 2)]);
      const params = { building_id: venue.building.id, date: `${dayD}T12:00:00.000Z` };
      const devicesIn = (response: { body: { analytics: { device_id: string }[] } }) =>
        response.body.analytics.map((record) => record.device_id);
      expect(devicesIn(await rawPoseData(admin, params))).toEqual(['member-phone', 'staff-tag']);
      expect(devicesIn(await rawPoseData(member.client, params))).toEqual(['member-phone']);
      expect(devicesIn(await rawPoseData(member.client, { ...params, device_id: 'staff-tag' }))).toEqual([]);
      const csv = await exportCsv(member.client, venue.building.id, { date: params.date });
      expect(csv.status).toBe(200);
      expect(
        parseCsv(csv.text)
          .slice(1)
          .map((record) => record[0]),
      ).toEqual(['member-phone']);
    });
  });

  describe('validation', () => {
    let buildingId: number;
    beforeAll(async () => {
      buildingId = (await createVenue(admin, 'History validation venue')).building.id;
    });

    it('answers 422 naming the field for a missing or bad date, a range backwards or over 31 days, a bad building or device', async () => {
      const date = `${dayD}T00:00:00.000+02:00`;
      const cases: [Record<string, string | number | undefined>, string][] = [
        [{ building_id: buildingId }, 'query.date'],
        [{ building_id: buildingId, date: 'yesterday' }, 'query.date'],
        [{ building_id: buildingId, date: '2026-02-30T00:00:00.000+02:00' }, 'query.date'],
        [{ building_id: buildingId, date: '2026-05-01T25:00:00.000+02:00' }, 'query.date'],
        [{ building_id: buildingId, date, date_end: 'tomorrow' }, 'query.date_end'],
        [{ building_id: buildingId, date, date_end: `${dayD}T00:00:00.000+02:00` }, 'query.date_end'],
        [{ building_id: buildingId, date, date_end: `${dayOf(D - DAY)}T23:00:00.000+02:00` }, 'query.date_end'],
        [{ building_id: buildingId, date, date_end: `${dayOf(D + 31 * DAY)}T00:00:00.001+02:00` }, 'query.date_end'],
        [{ date }, 'query.building_id'],
        [{ building_id: 'abc', date }, 'query.building_id'],
        [{ building_id: buildingId, date, device_id: '' }, 'query.device_id'],
      ];
      for (const [params, field] of cases) {
        const response = await rawPoseData(admin, params);
        expect(response.status, `${JSON.stringify(params)}: ${response.text}`).toBe(422);
        expect(response.body.code).toBe('validation_failed');
        expect(fieldsOf(response), JSON.stringify(params)).toContain(field);
      }
      const twice = await admin.get(
        `/api/v1/real_time/analytics/raw_pose_data?building_id=${buildingId}&date=${encodeURIComponent(date)}&device_id=a&device_id=b`,
      );
      expect(twice.status).toBe(422);
      expect(fieldsOf(twice)).toContain('query.device_id');
      // 31 days exactly is allowed.
      expect(
        (await rawPoseData(admin, { building_id: buildingId, date, date_end: `${dayOf(D + 31 * DAY)}T00:00:00.000+02:00` })).status,
      ).toBe(200);
    });

    it('validates the export the same way', async () => {
      const missing = await exportCsv(admin, buildingId, {});
      expect(missing.status).toBe(422);
      expect(fieldsOf(missing)).toContain('query.date');
      const backwards = await exportCsv(admin, buildingId, { date: `${dayD1}T00:00:00.000Z`, date_end: `${dayD}T00:00:00.000Z` });
      expect(backwards.status).toBe(422);
      expect(fieldsOf(backwards)).toEqual(['query.date_end']);
      const tooLong = await exportCsv(admin, buildingId, {
        date: `${dayD}T00:00:00.000Z`,
        date_end: `${dayOf(D + 40 * DAY)}T00:00:00.000Z`,
      });
      expect(tooLong.status).toBe(422);
      expect(fieldsOf(tooLong)).toEqual(['query.date_end']);
      expect((await exportCsv(admin, 0, { date: `${dayD}T00:00:00.000Z` })).status).toBe(422);
    });
  });
});
