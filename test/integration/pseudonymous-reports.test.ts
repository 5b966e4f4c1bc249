import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReportMaterializer } from '../../shared/reports/materializations.js';
import type { ReportMaterializer } from '../../shared/reports/materializer.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const HOUR = 3_600_000;
/** Yesterday's UTC midnight: every instant is past, and within POSITIONS_MAX_AGE. */
const DAY0 = Math.floor(Date.now() / 86_400_000) * 86_400_000 - 86_400_000;
const at = (hours: number, seconds = 0) => DAY0 + hours * HOUR + seconds * 1000;
const K = 5;
const settingsPath = '/api/v1/organizations/current_organization/privacy_settings';

/**
 * Pseudonymous reports (issue 32): six people in a busy room and two in a quiet one, over the same hour. Asked with
 * pseudonymize=true, no report names a user or a device, and no place-based cell rests on fewer than K people.
 */
describe(`privacy: pseudonymous reports (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let materializer: ReportMaterializer | undefined;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  const identities: string[] = [];
  const window = `from_date=${new Date(DAY0).toISOString()}&to_date=${new Date(DAY0 + 86_400_000).toISOString()}`;
  const report = async (name: string, query: string) => {
    const response = await admin.get(`/api/v1/reports/${name}.json?${window}&${query}`);
    expect(response.status, response.text).toBe(200);
    return response as { text: string; body: { data: Record<string, unknown>[] } };
  };
  const sql = <T = Record<string, unknown>>(text: string, params: unknown[] = []) =>
    running.gateway.services.storage.execute<T>(text, params);

  beforeAll(async () => {
    running = await startTestGateway({
      REPORTS_MATERIALIZE_INTERVAL_MS: '100',
      REPORTS_MATERIALIZE_LAG_MS: '0',
      REPORTS_PSEUDONYMOUS_MIN_PEOPLE: String(K),
    });
    admin = await adminClient(running.client);
    const { services } = running.gateway;
    if (services.jobs.kind === 'bullmq') materializer = startReportMaterializer(services.storage, services.config, services.logger);
    venue = await createVenue(admin, 'Pseudonymous venue');
    for (const [name, x] of [
      ['Busy room', 0],
      ['Quiet room', 20],
    ] as const) {
      const fence = await admin.post('/api/v1/geofences', {
        name,
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'POLYGON',
        cartesians: squareCartesians(x, 0, 10),
      });
      expect(fence.status, fence.text).toBe(201);
    }
    const poses: object[] = [];
    for (let person = 0; person < 8; person++) {
      const { user } = await createUser(admin, 'user');
      const device = `pseudo-${randomUUID().slice(0, 8)}`;
      identities.push(user.id, device);
      // Six in the busy room (all on one spot: one heatmap cell), two in the quiet one; in from outside, and out again.
      const x = person < 6 ? 5 : 25;
      for (const [second, px] of [
        [0, 50],
        [10, x],
        [20, x],
        [30, x],
        [40, 50],
      ] as const) {
        poses.push({
          device_id: device,
          user_id: user.id,
          timestamp: at(9, second),
          building_id: venue.building.id,
          floor_id: venue.floors[0].id,
          x: px,
          y: 5,
        });
      }
    }
    // And a loner, alone in an hour of their own at a spot of their own: every cell of theirs is under k.
    const loner = await createUser(admin, 'user');
    identities.push(loner.user.id, 'pseudo-loner');
    for (const second of [0, 10]) {
      poses.push({
        device_id: 'pseudo-loner',
        user_id: loner.user.id,
        timestamp: at(11, second),
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        x: 60,
        y: 40,
      });
    }
    const upload = await admin.post('/api/v1/realtime/positions', { poses });
    expect(upload.status, upload.text).toBe(204);
    for (let attempt = 0; ; attempt++) {
      const [row] = await sql<{ n: number }>('select count(*)::int as n from zone_events');
      if (row!.n === 16) break;
      if (attempt === 300) throw new Error(`16 zone events expected, ${row!.n} stored`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }, 120_000);
  afterAll(async () => {
    await materializer?.stop();
    await running?.stop();
  });

  const namesNoOne = (text: string) => {
    for (const identity of identities) expect(text).not.toContain(identity);
  };

  it('drops heatmap cells of fewer than k people and names no one', async () => {
    const floor = `building_id=${venue.building.id}&floor_id=${venue.floors[0].id}`;
    const plain = await report('heatmap', floor);
    // Without pseudonymize the quiet spot (two people) and the corridor are there.
    expect(plain.body.data.map((cell) => cell.weight).sort()).toEqual([1, 2, 6, 8]);
    const pseudonymous = await report('heatmap', `${floor}&pseudonymize=true`);
    expect(pseudonymous.body.data.map((cell) => cell.weight).sort()).toEqual([6, 8]);
    namesNoOne(pseudonymous.text);
  });

  it('drops thin cells of visitors, positioning_time and geofence stays; keeps the busy ones with pseudonyms', async () => {
    const building = `building_id=${venue.building.id}`;
    // Hours 09 (eight people) and 11 (the loner): only 09 stays.
    expect((await report('visitors', `${building}&group=hour`)).body.data).toHaveLength(2);
    const visitors = await report('visitors', `${building}&group=hour&pseudonymize=true`);
    expect(visitors.body.data).toEqual([expect.objectContaining({ visitors: 8 })]);
    expect((await report('positioning_time', `${building}&group=hour`)).body.data).toHaveLength(2);
    const positioning = await report('positioning_time', `${building}&group=hour&pseudonymize=true`);
    expect(positioning.body.data).toEqual([expect.objectContaining({ devices: 8 })]);
    const stays = await report('geofencing_stay_time', 'pseudonymize=true&session_threshold=60');
    // Six stays in the busy room, one per person; the quiet room's two are gone.
    expect(stays.body.data.map((row) => row.geofence_name)).toEqual(Array(6).fill('Busy room'));
    expect(new Set(stays.body.data.map((row) => row.device_id)).size).toBe(6);
    expect(stays.body.data.every((row) => /^d-[0-9a-f]{20}$/.test(String(row.device_id)))).toBe(true);
    expect(stays.body.data.every((row) => /^u-[0-9a-f]{20}$/.test(String(row.user_id)))).toBe(true);
    for (const answer of [visitors, positioning, stays]) namesNoOne(answer.text);
    const plain = await report('geofencing_stay_time', 'session_threshold=60');
    expect(plain.body.data).toHaveLength(8);
  });

  it('names no user or device in person-level reports and exports, with pseudonyms stable within one report only', async () => {
    const first = await report('raw_data', 'pseudonymize=true');
    expect(first.body.data).toHaveLength(42);
    namesNoOne(first.text);
    const devices = new Set(first.body.data.map((row) => row.device_id));
    expect(devices.size).toBe(9);
    const second = await report('raw_data', 'pseudonymize=true');
    expect(second.body.data.some((row) => devices.has(row.device_id))).toBe(false);
    const csv = await admin.get(`/api/v1/reports/user_positions.csv?${window}&pseudonymize=true`);
    expect(csv.status, csv.text).toBe(200);
    namesNoOne(csv.text);
    const sessions = await report('geofencing_sessions_matches', 'pseudonymize=true');
    expect(sessions.body.data.length).toBeGreaterThan(0);
    namesNoOne(sessions.text);
  });

  it('is forced for everyone but admins when the organization says so', async () => {
    const manager = await createUser(admin, 'user_manager');
    const floor = `building_id=${venue.building.id}&floor_id=${venue.floors[0].id}`;
    const weights = async (client: TestClient) => {
      const response = await client.get(`/api/v1/reports/heatmap.json?${window}&${floor}`);
      expect(response.status, response.text).toBe(200);
      return response.body.data.map((cell: { weight: number }) => cell.weight).sort();
    };
    expect(await weights(manager.client)).toEqual([1, 2, 6, 8]);
    expect((await manager.client.put(settingsPath, { reports_pseudonymous: true })).status).toBe(403);
    const set = await admin.put(settingsPath, { reports_pseudonymous: true });
    expect(set.status, set.text).toBe(200);
    expect(set.body).toMatchObject({ reports_pseudonymous: true, min_people: K });
    try {
      expect((await manager.client.get(settingsPath)).body).toMatchObject({ reports_pseudonymous: true, min_people: K });
      expect(await weights(manager.client)).toEqual([6, 8]);
      const raw = await manager.client.get(`/api/v1/reports/raw_data.csv?${window}`);
      expect(raw.status, raw.text).toBe(200);
      namesNoOne(raw.text);
      // Asking pseudonymize=false changes nothing for them; admins still get names.
      expect((await manager.client.get(`/api/v1/reports/heatmap.json?${window}&${floor}&pseudonymize=false`)).body.data).toHaveLength(2);
      expect(await weights(admin)).toEqual([1, 2, 6, 8]);
      expect((await admin.get(`/api/v1/reports/raw_data.csv?${window}`)).text).toContain(identities[1]);
      const audit = await admin.get('/api/v1/audit?object_type=privacy_settings');
      expect(audit.status, audit.text).toBe(200);
      expect(JSON.stringify(audit.body)).toContain('reports_pseudonymous');
    } finally {
      expect((await admin.put(settingsPath, { reports_pseudonymous: false })).status).toBe(200);
    }
    expect(await weights(manager.client)).toEqual([1, 2, 6, 8]);
    expect((await admin.put(settingsPath, { reports_pseudonymous: 'yes' })).status).toBe(422);
  });

  it('names devices by pseudonym in history exports when asked, or forced for everyone but admins', async () => {
    const day = encodeURIComponent(`${new Date(DAY0).toISOString().slice(0, 23)}+00:00`);
    const csvPath = `/api/v1/real_time/export/${venue.building.id}?date=${day}`;
    const jsonPath = `/api/v1/real_time/analytics/raw_pose_data?building_id=${venue.building.id}&date=${day}`;
    const devicesOf = (csv: string) =>
      new Set(
        csv
          .trim()
          .split('\r\n')
          .slice(1)
          .map((line) => line.split(',')[0]),
      );
    expect((await admin.get(csvPath)).text).toContain(identities[1]);
    const csv = await admin.get(`${csvPath}&pseudonymize=true`);
    expect(csv.status, csv.text).toBe(200);
    namesNoOne(csv.text);
    const codes = devicesOf(csv.text);
    expect(codes.size).toBe(9);
    expect([...codes].every((code) => /^d-[0-9a-f]{20}$/.test(code!))).toBe(true);
    const json = await admin.get(`${jsonPath}&pseudonymize=true`);
    expect(json.status, json.text).toBe(200);
    expect(json.body.analytics).toHaveLength(42);
    namesNoOne(json.text);
    // Another answer, other codes.
    expect(json.body.analytics.some((row: { device_id: string }) => codes.has(row.device_id))).toBe(false);
    const named = await admin.get(`${csvPath}&pseudonymize=true&device_id=${identities[1]}`);
    expect(named.status, named.text).toBe(422);
    expect(named.body.errors.map((error: { field: string }) => error.field)).toEqual(['query.device_id']);
    const manager = await createUser(admin, 'user_manager');
    expect((await admin.put(settingsPath, { reports_pseudonymous: true })).status).toBe(200);
    try {
      const forced = await manager.client.get(csvPath);
      expect(devicesOf(forced.text).size).toBe(9);
      namesNoOne(forced.text);
      namesNoOne((await manager.client.get(jsonPath)).text);
      expect((await admin.get(csvPath)).text).toContain(identities[1]);
    } finally {
      expect((await admin.put(settingsPath, { reports_pseudonymous: false })).status).toBe(200);
    }
  });

  it('refuses to be asked about a named person (422 naming the filter)', async () => {
    const response = await admin.get(`/api/v1/reports/raw_data.json?${window}&pseudonymize=true&device_ids=${identities[1]}`);
    expect(response.status, response.text).toBe(422);
    expect(response.body.errors.map((error: { field: string }) => error.field)).toEqual(['query.device_ids']);
    expect((await admin.get(`/api/v1/reports/raw_data.json?${window}&pseudonymize=maybe`)).status).toBe(422);
  });
});
