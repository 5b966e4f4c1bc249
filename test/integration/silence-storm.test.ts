import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, login } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SILENCE_S = 2;

/**
 * 30 devices of a building falling silent together (its Wi-Fi down) while 10 go on reporting: one BUILDING_SILENT
 * alarm listing them, no DEADMAN. Those that report again leave it; closing it gives the one still silent its DEADMAN.
 */
describe(`silence storms are one building alarm (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let control: TestSocket;
  let venue: Awaited<ReturnType<typeof createVenue>>;

  const at = (deviceId: string, x: number) => ({
    device_id: deviceId,
    timestamp: Date.now(),
    building_id: venue.building.id,
    floor_id: venue.floors[0].id,
    x,
    y: 20,
  });
  const upload = async (...poses: object[]) => {
    const response = await admin.post('/api/v1/realtime/positions', { poses });
    expect(response.status, response.text).toBe(204);
  };
  const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(2, '0')}`);

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Storm venue');
    const token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    control = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    expect((await control.request({ op: 'subscribe', topics: [`buildings/${venue.building.id}/alarms`] })).op).toBe('subscribed');
  });
  afterAll(async () => {
    control?.close();
    await running?.stop();
  });

  it('validates the storm settings, naming the field', async () => {
    const put = (body: object) => admin.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, body);
    for (const [body, field] of [
      [{ storm_share: 1.5 }, 'storm_share'],
      [{ storm_share: -0.1 }, 'storm_share'],
      [{ storm_min_devices: -1 }, 'storm_min_devices'],
    ] as const) {
      const refused = await put(body);
      expect(refused.status).toBe(422);
      expect(JSON.stringify(refused.body)).toContain(field);
    }
    const saved = await put({ deadman_silence_s: SILENCE_S, storm_share: 0.5, storm_min_devices: 5 });
    expect(saved.status).toBe(200);
    expect((await admin.get(`/api/v1/buildings/${venue.building.id}/alarm_settings`)).body).toEqual({
      building_id: venue.building.id,
      deadman_after_s: null,
      deadman_radius_m: null,
      deadman_silence_s: SILENCE_S,
      storm_share: 0.5,
      storm_min_devices: 5,
    });
  });

  it('30 devices silent together give one BUILDING_SILENT and no DEADMAN; closing it with one still silent gives that one its DEADMAN', async () => {
    const storming = ids('wifi', 30);
    const reporters = ids('cell', 10);
    await upload(...storming.map((id, i) => at(id, i)), ...reporters.map((id, i) => at(id, i + 40)));
    let back: string[] = [];
    let reporting = true;
    const reporter = (async () => {
      for (let step = 1; reporting; step++) {
        await upload(...[...reporters, ...back].map((id, i) => at(id, (i + step) % 90)));
        await sleep(400);
      }
    })();
    try {
      const raised = await control.next((f) => f.op === 'alarm' && f.data.type === 'BUILDING_SILENT', 15_000);
      expect(raised.data).toMatchObject({
        event: 'raised',
        state: 'OPEN',
        building_id: venue.building.id,
        device_id: null,
        details: { silent_count: 30, silence_s: SILENCE_S },
      });
      expect(raised.data.details.devices.map((d: { device_id: string }) => d.device_id).sort()).toEqual(storming);

      // All but one come back: they leave the storm, the alarm's details say so.
      back = storming.slice(1);
      const updated = await control.next(
        (f) => f.op === 'alarm' && f.data.type === 'BUILDING_SILENT' && f.data.event === 'updated' && f.data.details.silent_count === 1,
        15_000,
      );
      expect(updated.data).toMatchObject({ id: raised.data.id, state: 'OPEN', details: { devices: [{ device_id: 'wifi-00' }] } });
      const stored = await admin.get(`/api/v1/alarms/${raised.data.id}`);
      expect(stored.body).toMatchObject({ type: 'BUILDING_SILENT', details: { silent_count: 1 } });
      expect(control.frames.filter((f) => f.op === 'alarm' && f.data.type === 'DEADMAN')).toEqual([]);

      // Closed by a person: the one still silent gets its own DEADMAN, dated from its last fix.
      const closed = await admin.patch(`/api/v1/alarms/${raised.data.id}`, { state: 'CLOSED', comment: 'Access point restarted' });
      expect(closed.status, closed.text).toBe(200);
      const deadman = await control.next((f) => f.op === 'alarm' && f.data.type === 'DEADMAN', 15_000);
      expect(deadman.data).toMatchObject({ device_id: 'wifi-00', state: 'OPEN', details: { reason: 'silence' } });
      await sleep(1500);
    } finally {
      reporting = false;
      await reporter;
    }
    const deadmen = await admin.get(`/api/v1/alarms?type=DEADMAN&building_id=${venue.building.id}`);
    expect(deadmen.body.data.map((alarm: { device_id: string }) => alarm.device_id)).toEqual(['wifi-00']);
    const buildingAlarms = await admin.get(`/api/v1/alarms?type=BUILDING_SILENT&building_id=${venue.building.id}`);
    expect(buildingAlarms.body.data).toHaveLength(1);
  }, 60_000);
});
