import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createOrganization, login } from '../../testkit/identity.js';
import { registry } from '../../shared/metrics/metrics.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SILENCE_S = 2;
/** The gateway runs in this process: its counters are read from the registry. */
const deadLettered = async () =>
  (await registry.getSingleMetric('floorcast_detection_dead_letters_total')?.get())?.values.find((value) => value.labels.kind === 'alarm')
    ?.value ?? 0;

/**
 * Review NC1 point 2: tenant X's detections that the database refuses (here a check constraint the test adds that
 * rejects X's alarm rows, standing for any data of X's that cannot be stored) must neither block nor drop tenant
 * Y's DEADMAN, which is stored and pushed within its window. X's alarms are kept as dead letters, and stored once
 * the database takes them.
 */
describe(`one tenant's unstorable detections never stop another's alarm (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let token: string;
  let socket: TestSocket | undefined;

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
  });
  afterAll(async () => {
    socket?.close();
    await running?.stop();
  });

  it("stores and pushes Y's DEADMAN in its window while X's alarms are refused, and keeps X's for later", async () => {
    const { storage, detection } = running.gateway.services;
    const x = await createOrganization(admin);
    const xVenue = await createVenue(x.client, 'X venue');
    const yVenue = await createVenue(admin, 'Y venue');
    const yOrganizationId: string = (await admin.get('/api/v1/organizations/current_organization')).body.id;
    for (const [client, venue] of [
      [x.client, xVenue],
      [admin, yVenue],
    ] as const) {
      // No storm: X's devices fall silent together on purpose, and each must be its own (refused) DEADMAN here.
      expect(
        (
          await client.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, {
            deadman_silence_s: SILENCE_S,
            storm_min_devices: 1000,
          })
        ).status,
      ).toBe(200);
    }
    await storage.execute(`alter table alarms add constraint tenant_x_refused check (organization_id <> '${x.organization.id}'::uuid)`);
    socket = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    expect((await socket.request({ op: 'subscribe', topics: ['organization/alarms'] })).op).toBe('subscribed');
    const deadLettersBefore = await deadLettered();

    const pose = (venue: typeof xVenue, deviceId: string, x: number) => ({
      device_id: deviceId,
      timestamp: Date.now(),
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x,
      y: 20,
    });
    // Y's worker walks, then goes silent; X's devices report just before its last step, so they fall silent first
    // and sit ahead of it in the detector's order: their refused DEADMAN alarms come first in the sweep.
    for (const step of [10, 11]) {
      expect((await admin.post('/api/v1/realtime/positions', { poses: [pose(yVenue, 'worker', step)] })).status).toBe(204);
      await sleep(200);
    }
    const evil = Array.from({ length: 20 }, (_, index) => pose(xVenue, `evil-${index}`, 10 + index));
    expect((await x.client.post('/api/v1/realtime/positions', { poses: evil })).status).toBe(204);
    expect((await admin.post('/api/v1/realtime/positions', { poses: [pose(yVenue, 'worker', 12)] })).status).toBe(204);

    // The window: the silence, then a few sweeps.
    const pushed = await socket.next(
      (frame) => frame.op === 'alarm' && frame.data.type === 'DEADMAN' && frame.data.device_id === 'worker',
      (SILENCE_S + 4) * 1000,
    );
    expect(pushed.data).toMatchObject({
      organization_id: yOrganizationId,
      building_id: yVenue.building.id,
      state: 'OPEN',
      event: 'raised',
    });
    const stored = await storage.execute<{ id: string }>(
      "select id from alarms where organization_id = ? and type = 'DEADMAN' and device_id = 'worker'",
      [yOrganizationId],
    );
    expect(stored.map((row) => row.id)).toEqual([pushed.data.id]);

    // X's alarms were refused one by one: each set aside, counted, none dropped.
    for (let wait = 0; wait < 50 && detection.outbox.deadLetterCount < evil.length; wait++) await sleep(100);
    expect(detection.outbox.deadLetterCount).toBe(evil.length);
    expect(detection.outbox.droppedEntries).toBe(0);
    expect((await deadLettered()) - deadLettersBefore).toBeGreaterThanOrEqual(evil.length);

    // Once the database takes them, the dead letters are retried and stored, each once.
    await storage.execute('alter table alarms drop constraint tenant_x_refused');
    let xAlarms: { device_id: string }[] = [];
    for (let wait = 0; wait < 60 && xAlarms.length < evil.length; wait++) {
      await sleep(500);
      xAlarms = await storage.execute<{ device_id: string }>(
        "select device_id from alarms where organization_id = ? and type = 'DEADMAN'",
        [x.organization.id],
      );
    }
    expect(xAlarms.map((row) => row.device_id).sort()).toEqual(evil.map((item) => item.device_id).sort());
    expect(detection.outbox.deadLetterCount).toBe(0);
  });
});
