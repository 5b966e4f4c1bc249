import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createApiKey, createOrganization, login } from '../../testkit/identity.js';
import { driverLabel, serverDatabaseUrl, serverRedisUrl } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

describe(`WebSocket gateway (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let token: string;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  const sockets: TestSocket[] = [];
  const open = async (options: Parameters<typeof TestSocket.open>[1] = {}) => {
    const socket = await TestSocket.open(running.baseUrl, options);
    sockets.push(socket);
    return socket;
  };
  const pose = (deviceId: string, x: number) => ({
    device_id: deviceId,
    timestamp: Date.now(),
    building_id: venue.building.id,
    floor_id: venue.floors[0].id,
    x,
    y: 3,
    accuracy: 1.5,
  });

  beforeAll(async () => {
    running = await startTestGateway({ WS_AUTH_TIMEOUT_MS: '400' });
    token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Socket venue');
  });
  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await running?.stop();
  });

  it('authenticates with a Bearer header on the upgrade and refuses a bad one with 401', async () => {
    const socket = await open({ headers: { authorization: `Bearer ${token}` } });
    const hello = await socket.next((frame) => frame.op === 'authenticated');
    expect(hello).toMatchObject({ role: 'admin', permission: 'read-write' });
    await expect(TestSocket.open(running.baseUrl, { headers: { authorization: 'Bearer nonsense' } })).rejects.toMatchObject({
      statusCode: 401,
    });
  });

  it('authenticates with a first message carrying a JWT or an API key', async () => {
    const byJwt = await open();
    expect((await byJwt.request({ op: 'auth', token })).op).toBe('authenticated');
    const key = await createApiKey(admin, 'read-only');
    const byKey = await open();
    expect(await byKey.request({ op: 'auth', token: key })).toMatchObject({ op: 'authenticated', permission: 'read-only' });
    const wrong = await open();
    expect(await wrong.request({ op: 'auth', token: 'fc_wrong' })).toMatchObject({ op: 'error', status: 401 });
  });

  it('closes a connection that does not authenticate in time with 4401', async () => {
    const socket = await open();
    await socket.closed();
    expect(socket.closeCode).toBe(4401);
  });

  it('answers operations before authentication with an error frame', async () => {
    const socket = await open();
    expect(await socket.request({ op: 'subscribe', topics: [`buildings/${venue.building.id}/positions`] })).toMatchObject({
      op: 'error',
      status: 401,
    });
  });

  it('pushes live positions to a building subscriber as GeoJSON features', async () => {
    await admin.post('/api/v1/devices', { identifier: 'ws-tag' }); // a device topic names a known device
    const socket = await open({ headers: { authorization: `Bearer ${token}` } });
    const subscribed = await socket.request({ op: 'subscribe', topics: [`buildings/${venue.building.id}/positions`, 'devices/ws-tag'] });
    expect(subscribed).toMatchObject({ op: 'subscribed', topics: [`buildings/${venue.building.id}/positions`, 'devices/ws-tag'] });
    expect((await admin.post('/api/v1/realtime/positions', { poses: [pose('ws-tag', 7)] })).status).toBe(204);
    const frame = await socket.next((f) => f.op === 'position' && f.topic === `buildings/${venue.building.id}/positions`);
    expect(frame.data).toMatchObject({
      type: 'Feature',
      id: 'ws-tag',
      properties: { local_coordinates: [7, 3], accuracy: 1.5, floor_id: venue.floors[0].id },
    });
    await socket.next((f) => f.op === 'position' && f.topic === 'devices/ws-tag');
    const unsubscribed = await socket.request({
      op: 'unsubscribe',
      topics: [`buildings/${venue.building.id}/positions`, 'devices/ws-tag'],
    });
    expect(unsubscribed.op).toBe('unsubscribed');
    const before = socket.frames.length;
    await admin.post('/api/v1/realtime/positions', { poses: [pose('ws-tag', 8)] });
    expect((await socket.request({ op: 'ping' })).op).toBe('pong');
    expect(socket.frames.slice(before).filter((f) => f.op === 'position')).toEqual([]);
  });

  it('pushes each position of an upload once, two fixes of one device with one timestamp included', async () => {
    const socket = await open({ headers: { authorization: `Bearer ${token}` } });
    expect((await socket.request({ op: 'subscribe', topics: [`buildings/${venue.building.id}/positions`] })).op).toBe('subscribed');
    const timestamp = Date.now();
    const poses = [11, 12].map((x) => ({ ...pose('ws-twice', x), timestamp }));
    expect((await admin.post('/api/v1/realtime/positions', { poses })).status).toBe(204);
    await socket.next((f) => f.op === 'position' && f.data.properties.local_coordinates[0] === 12);
    expect((await socket.request({ op: 'ping' })).op).toBe('pong'); // anything pushed twice would be here by now
    const pushed = socket.frames.filter((f) => f.op === 'position' && f.data.id === 'ws-twice');
    expect(pushed.map((f) => f.data.properties.local_coordinates[0])).toEqual([11, 12]);
  });

  it("sends a batch's positions as one frame per topic to a socket opened with ?positions=batched", async () => {
    const topic = `buildings/${venue.building.id}/positions`;
    for (const protocol of [undefined, 'msgpack']) {
      const socket = await open({ headers: { authorization: `Bearer ${token}` }, protocol, query: 'positions=batched' });
      expect((await socket.request({ op: 'subscribe', topics: [topic] })).op).toBe('subscribed');
      const devices = ['batch-1', 'batch-2', 'batch-3'].map((device) => `${device}-${protocol ?? 'json'}`);
      expect((await admin.post('/api/v1/realtime/positions', { poses: devices.map((device, i) => pose(device, i)) })).status).toBe(204);
      const frame = await socket.next((f) => f.op === 'positions' && f.data.some((feature: any) => feature.id === devices[0]));
      expect(frame.topic).toBe(topic);
      expect(frame.data.map((feature: any) => [feature.type, feature.id, feature.properties.local_coordinates])).toEqual(
        devices.map((device, i) => ['Feature', device, [i, 3]]),
      );
      expect(socket.frames.filter((f) => f.op === 'position')).toEqual([]);
    }
    await expect(open({ headers: { authorization: `Bearer ${token}` }, query: 'positions=sometimes' })).rejects.toMatchObject({
      statusCode: 400,
    });
  });

  it('refuses a subscription outside the organization (or unknown) with an error frame and keeps the connection', async () => {
    const { client: other } = await createOrganization(admin);
    const otherVenue = await createVenue(other, 'Foreign venue');
    const socket = await open({ headers: { authorization: `Bearer ${token}` } });
    const id = 'foreign';
    socket.send({ op: 'subscribe', topics: [`buildings/${otherVenue.building.id}/positions`, 'nonsense/topic'], id });
    const errors = [
      await socket.next((f) => f.op === 'error' && f.topic?.startsWith('buildings/')),
      await socket.next((f) => f.op === 'error' && f.topic === 'nonsense/topic'),
    ];
    expect(errors.map((e) => e.status)).toEqual([404, 422]);
    expect((await socket.request({ op: 'ping' })).op).toBe('pong');
    expect(socket.closeCode).toBeUndefined();
  });

  it('answers malformed frames with an error frame and keeps the connection', async () => {
    const socket = await open({ headers: { authorization: `Bearer ${token}` } });
    socket.ws.send('{not json');
    expect(await socket.next((f) => f.op === 'error')).toMatchObject({ status: 400, code: 'invalid_json' });
    expect(await socket.request({ op: 'launch' })).toMatchObject({ op: 'error', status: 400 });
    expect((await socket.request({ op: 'ping' })).op).toBe('pong');
  });

  it('speaks standard msgpack on binary frames with the msgpack subprotocol', async () => {
    const socket = await open({ headers: { authorization: `Bearer ${token}` }, protocol: 'msgpack' });
    expect(socket.ws.protocol).toBe('msgpack');
    expect((await socket.request({ op: 'subscribe', topics: [`buildings/${venue.building.id}/positions`] })).op).toBe('subscribed');
    await admin.post('/api/v1/realtime/positions', { poses: [pose('msgpack-tag', 2)] });
    const frame = await socket.next((f) => f.op === 'position' && f.data.id === 'msgpack-tag');
    expect(frame.data.properties.local_coordinates).toEqual([2, 3]);
  });

  it('acknowledges an upload over the socket only once it is stored, and rejects a bad batch whole', async () => {
    const socket = await open({ headers: { authorization: `Bearer ${token}` } });
    const ack = await socket.request({ op: 'upload', poses: [pose('ws-upload', 1), pose('ws-upload', 2)] });
    expect(ack).toMatchObject({ op: 'ack', count: 2 });
    const [row] = await running.gateway.services.storage.execute<{ n: number }>(
      "select count(*)::int as n from positions where device_id = 'ws-upload'",
    );
    expect(row!.n).toBe(2);
    const refused = await socket.request({ op: 'upload', poses: [pose('ws-upload-bad', 1), { device_id: 'x' }] });
    expect(refused).toMatchObject({ op: 'error', status: 422, code: 'validation_failed' });
    expect(refused.errors.map((e: { field: string }) => e.field)).toContain('poses.1.timestamp');
    const readOnly = await open();
    await readOnly.request({ op: 'auth', token: await createApiKey(admin, 'read-only') });
    expect(await readOnly.request({ op: 'upload', poses: [pose('x', 1)] })).toMatchObject({ op: 'error', status: 403 });
  });

  it('lets a positioning key upload but not subscribe', async () => {
    const socket = await open({ headers: { 'x-api-key': await createApiKey(admin, 'positioning') } });
    expect((await socket.request({ op: 'upload', poses: [pose('kiosk-ws', 1)] })).op).toBe('ack');
    socket.send({ op: 'subscribe', topics: [`buildings/${venue.building.id}/positions`], id: 's' });
    expect(await socket.next((f) => f.op === 'error' && f.id === 's')).toMatchObject({ status: 403 });
  });
});

describe.runIf(serverDatabaseUrl && serverRedisUrl)(`WebSocket fan-out across gateways (${driverLabel})`, () => {
  it('delivers a position uploaded to one gateway to a subscriber connected to another', async () => {
    const first = await startTestGateway();
    const second = await startTestGateway({}, {}, first.environment);
    try {
      const admin = await adminClient(first.client);
      const venue = await createVenue(admin, 'Two gateways');
      const token = (await login(second.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
      const socket = await TestSocket.open(second.baseUrl, { headers: { authorization: `Bearer ${token}` } });
      expect((await socket.request({ op: 'subscribe', topics: [`buildings/${venue.building.id}/positions`] })).op).toBe('subscribed');
      const upload = await admin.post('/api/v1/realtime/positions', {
        poses: [{ device_id: 'roamer', timestamp: Date.now(), building_id: venue.building.id, floor_id: venue.floors[0].id, x: 4, y: 4 }],
      });
      expect(upload.status).toBe(204);
      const frame = await socket.next((f) => f.op === 'position' && f.data.id === 'roamer');
      expect(frame.data.properties.local_coordinates).toEqual([4, 4]);
      // And the other gateway's live view has it too.
      const live = await second.client.withToken(token).get(`/api/v1/real_time/building/${venue.building.id}`);
      expect(live.body.features.map((f: { id: string }) => f.id)).toContain('roamer');
      socket.close();
    } finally {
      await second.gateway.close();
      await first.stop();
    }
  });
});
