import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser, login } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

/** Issue 28 item 5: a `devices/{id}` subscription follows the device's owner, not the owner at subscribe time. */
describe(`device subscriptions follow ownership (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  let sockets: TestSocket[] = [];
  const pose = (deviceId: string, x: number) => ({
    device_id: deviceId,
    timestamp: Date.now(),
    building_id: venue.building.id,
    floor_id: venue.floors[0].id,
    x,
    y: 3,
  });

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Ownership venue');
  });
  afterEach(() => {
    for (const socket of sockets) socket.close();
    sockets = [];
  });
  afterAll(async () => {
    await running?.stop();
  });

  const socketOf = async (email: string, password: string) => {
    const token = (await login(running.client, email, password)).access_token;
    const socket = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    sockets.push(socket);
    await socket.next((frame) => frame.op === 'authenticated');
    return socket;
  };

  it('U1 subscribed to devices/<phone>; the admin gives the phone to U2; U2 uploads: U1 receives nothing and is told', async () => {
    const u1 = await createUser(admin, 'user');
    const u2 = await createUser(admin, 'user');
    const phone = `handover-${Date.now()}`;
    const device = await admin.post('/api/v1/devices', { identifier: phone, user_id: u1.user.id });
    expect(device.status, device.text).toBe(201);
    const first = await socketOf(u1.email, u1.password);
    expect(await first.request({ op: 'subscribe', topics: [`devices/${phone}`] })).toMatchObject({ op: 'subscribed' });
    // While it is U1's, U1's own upload reaches the subscription.
    expect((await u1.client.post('/api/v1/realtime/positions', { poses: [pose(phone, 1)] })).status).toBe(204);
    await first.next((frame) => frame.op === 'position' && frame.topic === `devices/${phone}`);

    const handed = await admin.put(`/api/v1/devices/${device.body.id}`, { user_id: u2.user.id });
    expect(handed.status, handed.text).toBe(200);
    expect(handed.body.user_id).toBe(u2.user.id);
    // U2 uploads at once, before any re-check could have run; an admin follows the phone as the witness.
    const witness = await TestSocket.open(running.baseUrl, {
      headers: { authorization: `Bearer ${(await login(running.client, 'admin@example.test', 'admin-password-1')).access_token}` },
    });
    sockets.push(witness);
    expect(await witness.request({ op: 'subscribe', topics: [`devices/${phone}`] })).toMatchObject({ op: 'subscribed' });
    expect((await u2.client.post('/api/v1/realtime/positions', { poses: [pose(phone, 9)] })).status).toBe(204);
    await witness.next((frame) => frame.op === 'position' && frame.data.properties.local_coordinates[0] === 9);
    // U1's subscription was dropped, and U1 was told so; nothing of U2's reached it.
    const dropped = await first.next((frame) => frame.op === 'unsubscribed' && frame.topics?.includes(`devices/${phone}`));
    expect(dropped).toMatchObject({ reason: expect.any(String) });
    expect((await first.request({ op: 'ping' })).op).toBe('pong');
    expect(first.frames.filter((frame) => frame.op === 'position' && frame.data.properties.local_coordinates[0] === 9)).toEqual([]);
    // A new subscription is refused; U2's is accepted and gets U2's positions.
    expect(await first.request({ op: 'subscribe', topics: [`devices/${phone}`] })).toMatchObject({ op: 'error', status: 403 });
    const second = await socketOf(u2.email, u2.password);
    expect(await second.request({ op: 'subscribe', topics: [`devices/${phone}`] })).toMatchObject({ op: 'subscribed' });
    expect((await u2.client.post('/api/v1/realtime/positions', { poses: [pose(phone, 11)] })).status).toBe(204);
    await second.next((frame) => frame.op === 'position' && frame.data.properties.local_coordinates[0] === 11);
    expect(first.frames.filter((frame) => frame.op === 'position' && frame.data.properties.local_coordinates[0] === 11)).toEqual([]);
  });

  it('a confined subscriber never gets a position of the device uploaded under another user, even before the re-check', async () => {
    const u1 = await createUser(admin, 'user');
    const u2 = await createUser(admin, 'user');
    const phone = `shared-${Date.now()}`;
    const device = await admin.post('/api/v1/devices', { identifier: phone, user_id: u1.user.id });
    expect(device.status, device.text).toBe(201);
    const first = await socketOf(u1.email, u1.password);
    expect(await first.request({ op: 'subscribe', topics: [`devices/${phone}`] })).toMatchObject({ op: 'subscribed' });
    // Many rounds of hand-over and immediate upload: whatever the order of the bus messages, U1 sees only its own.
    for (let round = 0; round < 5; round++) {
      expect((await admin.put(`/api/v1/devices/${device.body.id}`, { user_id: u2.user.id })).status).toBe(200);
      await u2.client.post('/api/v1/realtime/positions', { poses: [pose(phone, 20 + round)] });
      expect((await admin.put(`/api/v1/devices/${device.body.id}`, { user_id: u1.user.id })).status).toBe(200);
    }
    expect((await first.request({ op: 'ping' })).op).toBe('pong');
    const leaked = first.frames.filter((frame) => frame.op === 'position' && frame.data.properties.local_coordinates[0] >= 20);
    expect(leaked).toEqual([]);
  });
});
