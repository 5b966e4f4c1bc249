import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, login } from '../../testkit/identity.js';
import { registry } from '../../shared/metrics/metrics.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SILENCE_S = 2;
/** The gateway runs in this process: the gauge of stored dead letters is read from the registry. */
const storedGauge = async () => (await registry.getSingleMetric('floorcast_detection_dead_letters_stored')?.get())?.values[0]?.value ?? 0;
/** A device id with the characters that once split statements: the dead letter's payload must keep it intact. */
const DEVICE = "evil;'1";

/**
 * Issue 26 item 3: a detection the database refuses for a reason other than an outage is a dead letter, and a
 * dead letter outlives a restart (the positions that caused it were acknowledged long ago). X's DEADMAN is
 * refused (a check constraint the test adds, as in tenant-poison.test.ts), the gateway restarts on the same
 * storage, the constraint goes, and the alarm is stored exactly once and pushed, by the restarted gateway alone:
 * DEADMAN is switched off before the restart, so its detectors cannot raise it anew.
 */
describe(`a dead letter outlives a gateway restart (${driverLabel})`, () => {
  let running: RunningGateway;
  let socket: TestSocket | undefined;

  beforeAll(async () => {
    running = await startTestGateway();
  });
  afterAll(async () => {
    socket?.close();
    await running?.stop();
  });

  it('keeps the refused alarm in the database across the restart, then stores it once and pushes it', async () => {
    const admin = await adminClient(running.client);
    const email = `x-admin-${Date.now()}@dead-letters.test`;
    const created = await admin.post('/api/v1/organizations', {
      name: 'X',
      admin: { email, password: 'x-admin-password', full_name: 'X admin' },
    });
    expect(created.status, created.text).toBe(201);
    const organizationId: string = created.body.id;
    const clientOf = async (at: RunningGateway): Promise<[TestClient, string]> => {
      const token = (await login(at.client, email, 'x-admin-password')).access_token;
      return [at.client.withHeaders({ authorization: `Bearer ${token}` }), token];
    };
    let [x] = await clientOf(running);
    const venue = await createVenue(x, 'X venue');
    expect((await x.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, { deadman_silence_s: SILENCE_S })).status).toBe(200);
    await running.gateway.services.storage.execute(
      `alter table alarms add constraint tenant_x_refused check (organization_id <> '${organizationId}'::uuid)`,
    );

    const pose = { device_id: DEVICE, timestamp: Date.now(), building_id: venue.building.id, floor_id: venue.floors[0].id, x: 10, y: 20 };
    expect((await x.post('/api/v1/realtime/positions', { poses: [pose] })).status).toBe(204);

    // Refused: set aside, and kept in the database with what is needed to retry it.
    type Row = {
      organization_id: string;
      kind: string;
      payload: { alarm: { deviceId: string; type: string } };
      idempotency_key: string | null;
      attempts: number;
      first_error: string;
    };
    const stored = () =>
      running.gateway.services.storage.execute<Row>(
        'select organization_id, kind, payload, idempotency_key, attempts, first_error from detection_dead_letters where organization_id = ?',
        [organizationId],
      );
    let rows: Row[] = [];
    for (let wait = 0; wait < 100 && rows.length === 0; wait++) {
      await sleep(100);
      rows = await stored();
    }
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      kind: 'alarm',
      idempotency_key: expect.any(String),
      first_error: expect.stringContaining('tenant_x_refused'),
    });
    expect(rows[0]!.attempts).toBeGreaterThanOrEqual(1);
    const payload = typeof rows[0]!.payload === 'string' ? JSON.parse(rows[0]!.payload) : rows[0]!.payload;
    expect(payload.alarm).toMatchObject({ deviceId: DEVICE, type: 'DEADMAN', organizationId });
    // The restarted gateway's detectors must not raise it again: only the dead letter can bring it back.
    expect((await x.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, { deadman_silence_s: null })).status).toBe(200);

    running = await running.restart();
    const { storage } = running.gateway.services;
    expect(await stored()).toHaveLength(1);
    // biome-ignore lint/style/useConst: assigned beside the outer `x` in one destructuring
    let token: string;
    [x, token] = await clientOf(running);
    socket = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    expect((await socket.request({ op: 'subscribe', topics: ['organization/alarms'] })).op).toBe('subscribed');
    // The restarted gateway takes the dead letter back (and retries it, refused again), and counts it as stored.
    const { outbox } = running.gateway.services.detection;
    for (let wait = 0; wait < 100 && outbox.deadLetterCount === 0; wait++) await sleep(100);
    expect(outbox.deadLetterCount).toBe(1);
    expect(await storedGauge()).toBe(1);
    await storage.execute('alter table alarms drop constraint tenant_x_refused');

    // Retried by the restarted gateway after its backoff.
    const pushed = await socket.next(
      (frame) => frame.op === 'alarm' && frame.data.type === 'DEADMAN' && frame.data.device_id === DEVICE,
      60_000,
    );
    expect(pushed.data).toMatchObject({ organization_id: organizationId, building_id: venue.building.id, state: 'OPEN', event: 'raised' });
    const alarms = await storage.execute<{ id: string; occurrences: number }>(
      "select id, occurrences from alarms where organization_id = ? and type = 'DEADMAN'",
      [organizationId],
    );
    expect(alarms).toEqual([{ id: pushed.data.id, occurrences: 1 }]);
    for (let wait = 0; wait < 50 && (await stored()).length > 0; wait++) await sleep(100);
    expect(await stored()).toEqual([]);
    expect(outbox.deadLetterCount).toBe(0);
    for (let wait = 0; wait < 100 && (await storedGauge()) > 0; wait++) await sleep(100);
    expect(await storedGauge()).toBe(0);
  }, 120_000);
});
