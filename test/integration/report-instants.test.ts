import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csvRow } from '../../shared/csv/csv.js';
import { formatInstant } from '../../shared/reports/instant-format.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient } from '../../testkit/identity.js';
import { driverLabel, serverRedisUrl } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

// Around Madrid's change to summer time (2026-03-29 01:00Z), with milliseconds: a printed time truncates them.
const B = Date.UTC(2026, 2, 29, 0, 59, 58);
const INSTANTS = [B + 999, B + 1000, B + 1999, B + 2000, B + 2001, B + 3_600_000 + 500, B + 7_200_000];
// A window starting half-way through a second, so that instants are read as µs after a fractional origin.
const window = `from_date=${new Date(B + 500).toISOString()}&to_date=${new Date(B + 86_400_000).toISOString()}`;

/**
 * raw_data and user_positions read their instants as µs after from_date and print them from an offset per UTC
 * hour (instant-format.ts), and JSON rows are built by rowObjects (report-output.ts): the times are those
 * formatInstant gives each instant, in every zone, and the CSV holds the same cells as the JSON.
 */
describe(`report instants and bodies (${driverLabel}, jobs on ${serverRedisUrl ? 'BullMQ workers' : 'the in-process runner'})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let buildingId: number;

  beforeAll(async () => {
    running = await startTestGateway({ POSITIONS_MAX_AGE_SECONDS: String(100 * 365 * 86_400) });
    admin = await adminClient(running.client);
    const venue = await createVenue(admin, 'Instants venue');
    buildingId = venue.building.id;
    // Around every position: with a session threshold of 0, each is a stay of its own, entered and left at its instant.
    const fence = await admin.post('/api/v1/geofences', {
      name: 'Clock',
      building_id: buildingId,
      floor_id: venue.floors[0].id,
      type: 'POLYGON',
      cartesians: squareCartesians(5, 15, 20),
    });
    expect(fence.status, fence.text).toBe(201);
    const poses = INSTANTS.map((timestamp, i) => ({
      device_id: 'clock',
      timestamp,
      building_id: buildingId,
      floor_id: venue.floors[0].id,
      x: 10 + i,
      y: 20,
    }));
    expect((await admin.post('/api/v1/realtime/positions', { poses })).status).toBe(204);
  });
  afterAll(async () => running?.stop());

  const zones = ['UTC', 'Europe/Madrid', 'Asia/Kathmandu', 'America/St_Johns'];
  const reports = [
    ['raw_data', `device_ids=clock&building_ids=`],
    ['user_positions', `device_id=clock&building_id=`],
  ] as const;
  it.each(zones)('geofencing_sessions_matches in %s: entered and exited as formatInstant prints them', async (zone) => {
    const json = await admin.get(
      `/api/v1/reports/geofencing_sessions_matches.json?${window}&device_ids=clock&session_threshold=0&time_zone=${zone}`,
    );
    expect(json.status, json.text).toBe(200);
    const printed = INSTANTS.map((ms) => formatInstant(new Date(ms), zone));
    expect(json.body.data.map((row: { entered_at: string; exited_at: string }) => [row.entered_at, row.exited_at])).toEqual(
      printed.map((text) => [text, text]),
    );
  });
  for (const [name, filter] of reports) {
    it.each(zones)(`${name} in %s: the instants as formatInstant prints them, the same cells in JSON and CSV`, async (zone) => {
      const query = `${window}&${filter}${buildingId}&time_zone=${zone}`;
      const json = await admin.get(`/api/v1/reports/${name}.json?${query}`);
      expect(json.status, json.text).toBe(200);
      expect(json.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(json.body.data.map((row: { timestamp: string }) => row.timestamp)).toEqual(
        INSTANTS.map((ms) => formatInstant(new Date(ms), zone)),
      );
      expect(json.body.statistics).toMatchObject({ rows_read: INSTANTS.length, rows_returned: INSTANTS.length });
      const csv = await admin.get(`/api/v1/reports/${name}.csv?${query}`);
      expect(csv.status, csv.text).toBe(200);
      expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
      const names = json.body.meta.map((column: { name: string }) => column.name);
      expect(csv.text).toBe(
        csvRow(names) + json.body.data.map((row: Record<string, never>) => csvRow(names.map((column: string) => row[column]))).join(''),
      );
      expect(JSON.parse(csv.headers.get('x-db-statistics')!)).toMatchObject({ rows_read: INSTANTS.length, rows_returned: INSTANTS.length });
    });
  }
});
