import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DemoApi } from '../../demo/api-client.js';
import { seedDemoVenue } from '../../demo/seed.js';
import { Simulator } from '../../demo/simulator.js';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, login } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SILENCE_S = 4;

interface StoredAlarm {
  device_id: string;
  type: string;
  created_at: Date | string;
  details: { reason?: string; since?: string };
}

/**
 * A gateway stopped for longer than the silence window and started again on the same data: the silence was
 * ours, so devices that report within a window after the start raise nothing, and one that stays silent raises
 * its DEADMAN a window after the start (dated from its last fix). The demo's restart goes the same way.
 */
describe(`no dead-man alarm from our own downtime (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;

  const storage = () => running.gateway.services.storage;
  const deadmanAlarms = (since = 0) =>
    storage().execute<StoredAlarm>(
      "select device_id, type, created_at, details from alarms where type = 'DEADMAN' and created_at >= to_timestamp(?::float8 / 1000) order by device_id",
      [since],
    );
  /** Stops the gateway (as SIGTERM would), waits `downMs`, starts a new one on the same data; resolves with when it was started. */
  const restartAfter = async (downMs: number): Promise<number> => {
    await running.gateway.close();
    await sleep(downMs);
    const startedAt = Date.now();
    running = await startTestGateway({}, {}, running.environment);
    admin = await adminClient(running.client);
    return startedAt;
  };
  const subscribe = async (topics: string[]) => {
    const token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    const socket = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    expect((await socket.request({ op: 'subscribe', topics })).op).toBe('subscribed');
    return socket;
  };

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('stopped for longer than the silence window: devices back within a window raise nothing, the one still silent raises its DEADMAN a window after the start', async () => {
    const venue = await createVenue(admin, 'Downtime venue');
    expect((await admin.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, { deadman_silence_s: SILENCE_S })).status).toBe(200);
    const at = (deviceId: string, x: number) => ({
      device_id: deviceId,
      timestamp: Date.now(),
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x,
      y: 20,
    });
    const upload = async (...poses: object[]) => expect((await admin.post('/api/v1/realtime/positions', { poses })).status).toBe(204);
    await upload(at('back-1', 10), at('back-2', 30), at('stays-silent', 50));
    const lastFix = Date.now();
    await sleep(500);

    const startedAt = await restartAfter(SILENCE_S * 1000 + 1500);
    // The two come back at once and keep reporting; the third never does. They report before anything else is
    // set up, so that a loaded machine (logins, the subscription) cannot stretch their return past the window.
    let reporting = true;
    const reporter = (async () => {
      for (let x = 11; reporting; x++) {
        await upload(at('back-1', x), at('back-2', x + 20));
        await sleep(500);
      }
    })();
    const control = await subscribe([`buildings/${venue.building.id}/alarms`]);
    try {
      const frame = await control.next((f) => f.op === 'alarm' && f.data.type === 'DEADMAN', 15_000);
      expect(frame.data).toMatchObject({ device_id: 'stays-silent', details: { reason: 'silence' } });
      await sleep(1500);
    } finally {
      reporting = false;
      await reporter;
      control.close();
    }
    const stored = await deadmanAlarms();
    expect(stored.map((alarm) => alarm.device_id)).toEqual(['stays-silent']);
    // Raised a window after we came back, not at once for the time we were gone; dated from its last fix.
    expect(new Date(stored[0]!.created_at).getTime()).toBeGreaterThanOrEqual(startedAt + SILENCE_S * 1000);
    expect(Date.parse(stored[0]!.details.since!)).toBeLessThanOrEqual(lastFix);
    expect(control.frames.filter((f) => f.op === 'alarm' && f.data.type === 'DEADMAN').map((f) => f.data.device_id)).toEqual([
      'stays-silent',
    ]);
  }, 60_000);

  it('the demo stopped for longer than its silence window and started again raises no DEADMAN flood', async () => {
    const seed = { maxStaySeconds: 600, deadmanSilenceSeconds: 4, responders: 2 };
    let venue = await seedDemoVenue(await DemoApi.signIn(running.baseUrl, ADMIN_EMAIL, ADMIN_PASSWORD), seed);
    const walk = (apiKey: string) =>
      Simulator.connect({
        url: running.baseUrl,
        apiKey,
        buildingId: venue.buildingId,
        devices: 12,
        intervalMs: 250,
        lingerers: 0,
        silentAfterSeconds: 3600,
        dangerAfterSeconds: 3600,
      });
    let simulator = await walk(venue.simulatorApiKey);
    simulator.start();
    await sleep(1500);
    await simulator.stop();
    expect(simulator.stats.failedUploads).toBe(0);

    // As `npm run demo` after Ctrl-C and a pause: the same data, the venue reused, the same devices walking again.
    const startedAt = await restartAfter(5000);
    venue = await seedDemoVenue(await DemoApi.signIn(running.baseUrl, ADMIN_EMAIL, ADMIN_PASSWORD), seed);
    simulator = await walk(venue.simulatorApiKey);
    simulator.start();
    await sleep(4000 + 2000); // the silence window after the start, and more
    await simulator.stop();
    expect(simulator.stats.failedUploads).toBe(0);
    expect((await deadmanAlarms(startedAt - 5000)).filter((alarm) => alarm.device_id.startsWith('demo-'))).toEqual([]);
  }, 60_000);
});
