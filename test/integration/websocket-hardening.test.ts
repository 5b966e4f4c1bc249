import http from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createUser, login } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { encode } from '../../gateway/ws/ws-codec.js';
import { TestSocket } from '../../testkit/ws-client.js';

const MAX_MESSAGE_BYTES = 256 * 1024;
const MAX_TOPICS = 3;
const MAX_IN_FLIGHT = 2;
const MAX_UNAUTHENTICATED = 3;

/** Issue 13: no WebSocket input crashes the gateway; sockets are bounded; alarm replay is exact; users see only their own. */
describe(`WebSocket hardening (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let token: string;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  let sockets: TestSocket[] = [];
  const open = async (options: Parameters<typeof TestSocket.open>[1] = {}) => {
    const socket = await TestSocket.open(running.baseUrl, options);
    sockets.push(socket);
    return socket;
  };
  const authenticated = () => open({ headers: { authorization: `Bearer ${token}` } });
  const pose = (deviceId: string, x: number, extra: object = {}) => ({
    device_id: deviceId,
    timestamp: Date.now(),
    building_id: venue.building.id,
    floor_id: venue.floors[0].id,
    x,
    y: 3,
    ...extra,
  });

  beforeAll(async () => {
    running = await startTestGateway({
      WS_MAX_MESSAGE_BYTES: String(MAX_MESSAGE_BYTES),
      WS_MAX_TOPICS: String(MAX_TOPICS),
      WS_MAX_IN_FLIGHT: String(MAX_IN_FLIGHT),
      WS_MAX_UNAUTHENTICATED_PER_ADDRESS: String(MAX_UNAUTHENTICATED),
    });
    token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Hardening venue');
  });
  // Every test closes its sockets, so the unauthenticated count per address starts from zero.
  afterEach(async () => {
    for (const socket of sockets) socket.close();
    await Promise.all(sockets.map((socket) => socket.closed()));
    sockets = [];
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('survives an id nested 100,000 deep: an error frame that does not echo it, and the socket still answers', async () => {
    const socket = await open();
    const depth = 100_000;
    socket.ws.send(`{"op":"ping","id":${'['.repeat(depth)}${']'.repeat(depth)}}`);
    const error = await socket.next((frame) => frame.op === 'error');
    expect(error).toMatchObject({ status: 400, code: 'bad_request' });
    expect(error).not.toHaveProperty('id');
    expect(await socket.request({ op: 'ping' })).toMatchObject({ op: 'pong' });
    // Deep nesting elsewhere in a message, and ids of the wrong kind, get the same treatment.
    socket.ws.send(`{"op":"subscribe","topics":${'['.repeat(depth)}${']'.repeat(depth)},"id":"deep-topics"}`);
    expect(await socket.next((frame) => frame.id === 'deep-topics')).toMatchObject({ op: 'error', status: 400 });
    for (const id of ['x'.repeat(129), { nested: true }, true]) {
      const before = socket.frames.length;
      socket.send({ op: 'ping', id });
      const reply = await socket.next((frame) => socket.frames.indexOf(frame) >= before);
      expect(reply).toMatchObject({ op: 'error', status: 400 });
      expect(reply).not.toHaveProperty('id');
    }
    expect(await socket.request({ op: 'ping' })).toMatchObject({ op: 'pong' });
    // The same in msgpack, whose decoder recurses: a deep top-level array, and a deep id in a ping.
    const deepArray = Buffer.concat([Buffer.alloc(depth, 0x91), Buffer.from([0x90])]); // [[[...[]...]]]
    const ping = Buffer.from([0x82, 0xa2, 0x6f, 0x70, 0xa4, 0x70, 0x69, 0x6e, 0x67, 0xa2, 0x69, 0x64]); // {op:'ping',id:
    for (const frame of [deepArray, Buffer.concat([ping, deepArray])]) {
      const before = socket.frames.length;
      socket.ws.send(frame, { binary: true });
      const reply = await socket.next((candidate) => socket.frames.indexOf(candidate) >= before);
      expect(reply).toMatchObject({ op: 'error', status: 400 });
      expect(reply).not.toHaveProperty('id');
    }
    expect(await socket.request({ op: 'ping' })).toMatchObject({ op: 'pong' });
    // Bounded ids are echoed as they came.
    socket.send({ op: 'ping', id: 'x'.repeat(128) });
    socket.send({ op: 'ping', id: 42 });
    await socket.next((frame) => frame.id === 'x'.repeat(128));
    expect(await socket.next((frame) => frame.id === 42)).toMatchObject({ op: 'pong' });
  });

  it('refuses strings PostgreSQL cannot store (NUL, lone surrogates) with a 422 error frame, in JSON and msgpack alike', async () => {
    // Found by the fuzz suite: a topic with a NUL reached a query, and embedded PostgreSQL answered "outage".
    const socket = await authenticated();
    socket.ws.send('{"op":"subscribe","topics":["devices/a\\u0000b"],"id":"nul"}');
    expect(await socket.next((frame) => frame.id === 'nul')).toMatchObject({ op: 'error', status: 422, code: 'validation_failed' });
    socket.ws.send('{"op":"upload","poses":[{"device_id":"\\ud800","timestamp":1}],"id":"surrogate"}');
    expect(await socket.next((frame) => frame.id === 'surrogate')).toMatchObject({ op: 'error', status: 422 });
    socket.ws.send(encode('msgpack', { op: 'subscribe', topics: ['devices/a\u0000b'], id: 'nul-msgpack' }) as Buffer);
    expect(await socket.next((frame) => frame.id === 'nul-msgpack')).toMatchObject({ op: 'error', status: 422 });
    expect(await socket.request({ op: 'ping' })).toMatchObject({ op: 'pong' });
  });

  it('closes a socket sending a message over WS_MAX_MESSAGE_BYTES with 1009 "message too big"', async () => {
    for (const size of [MAX_MESSAGE_BYTES + 1, Math.floor(MAX_MESSAGE_BYTES * 1.5)]) {
      const socket = await authenticated();
      socket.ws.send(JSON.stringify({ op: 'ping', id: 'x', pad: 'x'.repeat(size) }));
      await socket.closed();
      expect(socket.closeCode).toBe(1009);
      expect(socket.closeReason).toBe('message too big');
    }
    // A message at the limit is fine.
    const socket = await authenticated();
    const padding = MAX_MESSAGE_BYTES - JSON.stringify({ op: 'ping', id: 'at-limit', pad: '' }).length;
    socket.ws.send(JSON.stringify({ op: 'ping', id: 'at-limit', pad: 'x'.repeat(padding) }));
    expect(await socket.next((frame) => frame.id === 'at-limit')).toMatchObject({ op: 'pong' });
  });

  it('caps the topics of one socket at WS_MAX_TOPICS with an error frame, counting across subscribe operations', async () => {
    await admin.post('/api/v1/devices', { identifier: 'topic-cap' });
    const socket = await authenticated();
    const building = (kind: string) => `buildings/${venue.building.id}/${kind}`;
    expect(await socket.request({ op: 'subscribe', topics: [building('positions'), building('alarms')] })).toMatchObject({
      op: 'subscribed',
    });
    // Subscribing again to a topic already held costs nothing.
    expect(await socket.request({ op: 'subscribe', topics: [building('positions'), 'devices/topic-cap'] })).toMatchObject({
      op: 'subscribed',
    });
    const refused = await socket.request({ op: 'subscribe', topics: ['organization/alarms'] });
    expect(refused).toMatchObject({ op: 'error', status: 422, code: 'validation_failed' });
    expect(refused.errors[0].message).toContain(String(MAX_TOPICS));
    expect(await socket.request({ op: 'unsubscribe', topics: ['devices/topic-cap'] })).toMatchObject({ op: 'unsubscribed' });
    expect(await socket.request({ op: 'subscribe', topics: ['organization/alarms'] })).toMatchObject({ op: 'subscribed' });
    expect(socket.closeCode).toBeUndefined();
  });

  it('answers operations over WS_MAX_IN_FLIGHT with rate_limited error frames and keeps serving the socket', async () => {
    const socket = await authenticated();
    const ids = Array.from({ length: 20 }, (_, i) => `burst-${i}`);
    for (const [i, id] of ids.entries()) socket.send({ op: 'upload', id, poses: [pose(`in-flight-${i}`, i)] });
    const replies = await Promise.all(ids.map((id) => socket.next((frame) => frame.id === id, 15_000)));
    const limited = replies.filter((reply) => reply.op === 'error');
    const acked = replies.filter((reply) => reply.op === 'ack');
    expect(limited.length).toBeGreaterThan(0);
    expect(acked.length).toBeGreaterThanOrEqual(MAX_IN_FLIGHT);
    expect(limited.length + acked.length).toBe(ids.length);
    for (const reply of limited) expect(reply).toMatchObject({ status: 429, code: 'rate_limited' });
    // Refused uploads were not stored; acknowledged ones were.
    const rows = await running.gateway.services.storage.execute<{ device_id: string }>(
      "select device_id from positions where device_id like 'in-flight-%'",
    );
    const stored = rows.map((row) => row.device_id).sort();
    expect(stored).toEqual(acked.map((reply) => `in-flight-${ids.indexOf(reply.id)}`).sort());
    expect(await socket.request({ op: 'upload', poses: [pose('in-flight-after', 1)] })).toMatchObject({ op: 'ack' });
  });

  it('refuses more than WS_MAX_UNAUTHENTICATED_PER_ADDRESS unauthenticated sockets from one address with 429 JSON', async () => {
    const waiting = [];
    for (let i = 0; i < MAX_UNAUTHENTICATED; i++) waiting.push(await open());
    await expect(TestSocket.open(running.baseUrl)).rejects.toMatchObject({ statusCode: 429 });
    // Sockets authenticated on the upgrade are not counted.
    expect(await (await authenticated()).request({ op: 'ping' })).toMatchObject({ op: 'pong' });
    // Once one authenticates, or closes, room is made for another.
    expect(await waiting[0]!.request({ op: 'auth', token })).toMatchObject({ op: 'authenticated' });
    const another = await open();
    await expect(TestSocket.open(running.baseUrl)).rejects.toMatchObject({ statusCode: 429 });
    another.close();
    await another.closed();
    await open();
  });

  it('answers the refused upgrade with the flat JSON error body', async () => {
    for (let i = 0; i < MAX_UNAUTHENTICATED; i++) await open();
    // fetch refuses Upgrade headers: a raw HTTP request shows the status and body a client gets instead of 101.
    const response = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = http.get(`${running.baseUrl}/api/v1/ws`, {
        headers: {
          connection: 'Upgrade',
          upgrade: 'websocket',
          'sec-websocket-version': '13',
          'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        },
      });
      request.on('response', (res) => {
        let body = '';
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      request.on('upgrade', () => reject(new Error('upgraded')));
      request.on('error', reject);
    });
    expect(response.status).toBe(429);
    expect(JSON.parse(response.body)).toMatchObject({ status: 429, code: 'rate_limited' });
  });

  it('replays alarms after since_seq exactly once and in seq order while alarms are raised during a slow replay', async () => {
    const raise = (device: string) => admin.post('/api/v1/alarms', { type: 'ASSISTANCE_REQUEST', device_id: device });
    const first = (await raise('replay-0')).body.seq as number;
    await raise('replay-1');
    // Hold the replay's storage read until alarms have been raised (and pushed live) meanwhile.
    const alarms = running.gateway.services.alarms;
    const original = alarms.eventsSince.bind(alarms);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const replayStarted = new Promise<void>((resolve) => (entered = resolve));
    alarms.eventsSince = async function* (...args: Parameters<typeof original>) {
      entered();
      await gate;
      yield* original(...args);
    };
    try {
      const socket = await authenticated();
      const subscribed = socket.request({ op: 'subscribe', topics: ['organization/alarms'], since_seq: first - 1 }, 15_000);
      await replayStarted;
      for (let i = 2; i < 6; i++) expect((await raise(`replay-${i}`)).status).toBe(201);
      // A repeat updates the OPEN alarm of that device: a new event, with a new seq, of an alarm replayed already.
      expect((await raise('replay-1')).status).toBe(200);
      release();
      expect(await subscribed).toMatchObject({ op: 'subscribed' });
      for (let i = 6; i < 8; i++) expect((await raise(`replay-${i}`)).status).toBe(201);
      const [{ max }] = (await running.gateway.services.storage.execute<{ max: string }>('select max(seq) as max from alarm_events')) as [
        { max: string },
      ];
      await socket.next((frame) => frame.op === 'alarm' && frame.data.seq === Number(max));
      await socket.request({ op: 'ping' });
      const received = socket.frames.filter((frame) => frame.op === 'alarm').map((frame) => frame.data.seq as number);
      expect(received).toEqual(Array.from({ length: Number(max) - first + 1 }, (_, i) => first + i));
    } finally {
      alarms.eventsSince = original;
    }
  });

  describe('a plain user', () => {
    let user: Awaited<ReturnType<typeof createUser>>;
    let colleague: Awaited<ReturnType<typeof createUser>>;
    let userSocket: () => Promise<TestSocket>;

    beforeAll(async () => {
      user = await createUser(admin, 'user');
      colleague = await createUser(admin, 'user');
      const userToken = (await login(running.client, user.email, user.password)).access_token;
      userSocket = () => open({ headers: { authorization: `Bearer ${userToken}` } });
    });

    it('receives only its own positions on a building topic, while an admin receives all', async () => {
      const topic = `buildings/${venue.building.id}/positions`;
      const mine = await userSocket();
      const everything = await authenticated();
      const batched = await open({ headers: { authorization: `Bearer ${token}` }, query: 'positions=batched' });
      for (const socket of [mine, everything, batched])
        expect(await socket.request({ op: 'subscribe', topics: [topic] })).toMatchObject({ op: 'subscribed' });
      const poses = [
        pose('confined-theirs', 1, { user_id: colleague.user.id }),
        pose('confined-mine', 2, { user_id: user.user.id }),
        pose('confined-nobody', 3),
      ];
      expect((await admin.post('/api/v1/realtime/positions', { poses })).status).toBe(204);
      await everything.next((frame) => frame.op === 'position' && frame.data.id === 'confined-nobody');
      await batched.next((frame) => frame.op === 'positions');
      await mine.next((frame) => frame.op === 'position' && frame.data.id === 'confined-mine');
      await mine.request({ op: 'ping' });
      await everything.request({ op: 'ping' });
      expect(mine.frames.filter((frame) => frame.op === 'position').map((frame) => frame.data.id)).toEqual(['confined-mine']);
      expect(everything.frames.filter((frame) => frame.op === 'position').map((frame) => frame.data.id)).toEqual([
        'confined-theirs',
        'confined-mine',
        'confined-nobody',
      ]);
    });

    it('receives only alarms and geofence events about itself, live and in since_seq replay', async () => {
      const raise = (userId: string | undefined, device: string) =>
        admin.post('/api/v1/alarms', {
          type: 'DANGER',
          device_id: device,
          building_id: venue.building.id,
          ...(userId ? { user_id: userId } : {}),
        });
      const before = (await raise(colleague.user.id, 'confined-alarm-before-theirs')).body.seq as number;
      await raise(user.user.id, 'confined-alarm-before-mine');
      const topics = ['organization/alarms', `buildings/${venue.building.id}/alarms`, `buildings/${venue.building.id}/geofence-events`];
      const mine = await userSocket();
      expect(await mine.request({ op: 'subscribe', topics, since_seq: before - 1 })).toMatchObject({ op: 'subscribed' });
      await raise(colleague.user.id, 'confined-alarm-after-theirs');
      await raise(undefined, 'confined-alarm-after-nobody');
      await raise(user.user.id, 'confined-alarm-after-mine');
      const { organization_id: organizationId } = await mine.next((frame) => frame.op === 'authenticated');
      for (const [who, id] of [
        ['theirs', colleague.user.id],
        ['mine', user.user.id],
      ] as const) {
        running.gateway.services.websockets.publish(organizationId, topics[2]!, 'geofence_event', {
          user_id: id,
          device_id: `fence-${who}`,
        });
      }
      await mine.next((frame) => frame.op === 'geofence_event');
      await mine.next((frame) => frame.op === 'alarm' && frame.topic === topics[1] && frame.data.device_id === 'confined-alarm-after-mine');
      await mine.request({ op: 'ping' });
      const alarms = mine.frames.filter((frame) => frame.op === 'alarm');
      expect(alarms.every((frame) => frame.data.user_id === user.user.id)).toBe(true);
      for (const topic of topics.slice(0, 2)) {
        expect(alarms.filter((frame) => frame.topic === topic).map((frame) => frame.data.device_id)).toEqual([
          'confined-alarm-before-mine',
          'confined-alarm-after-mine',
        ]);
      }
      expect(mine.frames.filter((frame) => frame.op === 'geofence_event').map((frame) => frame.data.device_id)).toEqual(['fence-mine']);
    });
  });
});
