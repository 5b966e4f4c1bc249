import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, login } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

/**
 * An OPEN silence DEADMAN whose device reports again is updated (`alarm.updated`) with when and where contact
 * came back; a person confirms it, unless the organization has it closed automatically.
 */
describe(`contact restored on a silence DEADMAN (${driverLabel})`, () => {
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
  const upload = async (...poses: object[]) => expect((await admin.post('/api/v1/realtime/positions', { poses })).status).toBe(204);
  const alarmFrame = (deviceId: string, event: string, extra: (frame: any) => boolean = () => true) =>
    control.next(
      (f) => f.op === 'alarm' && f.data.type === 'DEADMAN' && f.data.device_id === deviceId && f.data.event === event && extra(f),
      15_000,
    );

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Contact venue');
    expect((await admin.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, { deadman_silence_s: 1 })).status).toBe(200);
    const token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    control = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    expect((await control.request({ op: 'subscribe', topics: ['organization/alarms'] })).op).toBe('subscribed');
  });
  afterAll(async () => {
    control?.close();
    await running?.stop();
  });

  it('is off by default: the alarm is updated with contact_restored_at and the position, and stays OPEN', async () => {
    expect((await admin.get('/api/v1/organizations/current_organization/alarm_settings')).body).toMatchObject({
      deadman_auto_close: false,
    });
    await upload(at('lost', 10));
    const raised = await alarmFrame('lost', 'raised');
    expect(raised.data).toMatchObject({ state: 'OPEN', contact_restored_at: null, details: { reason: 'silence' } });

    await upload(at('lost', 30));
    const updated = await alarmFrame('lost', 'updated');
    const restoredAt = updated.data.contact_restored_at as string;
    expect(Date.parse(restoredAt)).toBeGreaterThan(Date.parse(raised.data.created_at));
    expect(updated.data).toMatchObject({
      id: raised.data.id,
      state: 'OPEN',
      occurrences: 1,
      details: {
        reason: 'silence',
        contact_restored_at: restoredAt,
        contact_restored_position: { building_id: venue.building.id, floor_id: venue.floors[0].id, cartesians: { x: 30, y: 20 } },
      },
    });
    // Stored as pushed.
    const stored = await admin.get(`/api/v1/alarms/${raised.data.id}`);
    expect(stored.body).toMatchObject({
      state: 'OPEN',
      contact_restored_at: restoredAt,
      occurrences: 1,
      details: { contact_restored_at: restoredAt },
    });

    // Silent again: the repeat folds into the same OPEN alarm and is no longer restored.
    const again = await alarmFrame('lost', 'updated', (f) => f.data.occurrences === 2);
    expect(again.data).toMatchObject({ id: raised.data.id, contact_restored_at: null });
  });

  it('with deadman_auto_close the system closes it, saying why, when the device reports again', async () => {
    expect((await admin.put('/api/v1/organizations/current_organization/alarm_settings', { deadman_auto_close: 'yes' })).status).toBe(422);
    const put = await admin.put('/api/v1/organizations/current_organization/alarm_settings', { deadman_auto_close: true });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ deadman_auto_close: true });
    expect((await admin.get('/api/v1/organizations/current_organization/alarm_settings')).body).toMatchObject({ deadman_auto_close: true });

    await upload(at('wanderer', 10));
    const raised = await alarmFrame('wanderer', 'raised');
    await upload(at('wanderer', 40));
    const updated = await alarmFrame('wanderer', 'updated');
    expect(updated.data.contact_restored_at).not.toBeNull();
    const closed = await alarmFrame('wanderer', 'state_changed');
    expect(closed.data).toMatchObject({ id: raised.data.id, state: 'CLOSED', contact_restored_at: updated.data.contact_restored_at });
    expect(closed.data.history.at(-1)).toMatchObject({
      state: 'CLOSED',
      from: 'OPEN',
      by: 'system',
      comment: expect.stringContaining('Contact restored'),
    });
    expect((await admin.get(`/api/v1/alarms/${raised.data.id}`)).body).toMatchObject({ state: 'CLOSED' });
    expect((await admin.put('/api/v1/organizations/current_organization/alarm_settings', { deadman_auto_close: false })).status).toBe(200);
  });
});
