import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, login } from '../../testkit/identity.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';
import { DocumentValidator } from './schema-validator.js';

/**
 * The WebSocket protocol against its served AsyncAPI document: a session that goes through every operation
 * (auth, subscribe with a refused topic, ping, upload, unsubscribe, a malformed frame) and provokes every push
 * (single and batched positions, geofence events and event-area entries one by one and batched, live and
 * replayed alarms), on JSON and msgpack sockets. Every frame either side sent must match the document's schema for its `op`, closed.
 */
type Schema = Record<string, any>;

describe('the AsyncAPI document describes every WebSocket frame', () => {
  let running: RunningGateway;
  let admin: TestClient;
  let token: string;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  let asyncApi: Schema;
  let validator: DocumentValidator;
  const sockets: TestSocket[] = [];
  const sent: object[] = [];

  const open = async (options: Parameters<typeof TestSocket.open>[1] = {}) => {
    const socket = await TestSocket.open(running.baseUrl, options);
    const send = socket.send.bind(socket);
    socket.send = (message: object) => (sent.push(message), send(message));
    sockets.push(socket);
    return socket;
  };

  /** The payload schema of a message of the document, by side and op. */
  const payloadOf = (side: 'client' | 'server', op: string): Schema | undefined =>
    asyncApi.components.messages[`${side}_${op}`]?.payload?.schema;

  function check(side: 'client' | 'server', frame: { op?: string }): string[] {
    const schema = payloadOf(side, String(frame.op));
    if (!schema) return [`${side} frame op ${String(frame.op)} is not in the document: ${JSON.stringify(frame).slice(0, 200)}`];
    const union = asyncApi.components.schemas[side === 'client' ? 'ClientFrame' : 'ServerFrame'];
    return [...validator.errors(schema, frame), ...validator.errors(union, frame)].map(
      (error) => `${side} ${frame.op}: ${error} in ${JSON.stringify(frame).slice(0, 300)}`,
    );
  }

  beforeAll(async () => {
    running = await startTestGateway();
    token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    admin = running.client.withToken(token);
    venue = await createVenue(admin, 'Socket venue');
    const response = await fetch(`${running.baseUrl}/api/v1/asyncapi.json`);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    asyncApi = await response.json();
    validator = new DocumentValidator(asyncApi);
  });
  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await running?.stop();
  });

  it('is an AsyncAPI 3 document with one channel and a message per frame kind', () => {
    expect(asyncApi.asyncapi).toBe('3.0.0');
    expect(asyncApi.channels.ws.address).toBe('/api/v1/ws');
    for (const [name, operation] of Object.entries(asyncApi.operations as Record<string, Schema>)) {
      expect(operation.channel.$ref).toBe('#/channels/ws');
      expect(operation.messages[0].$ref).toBe(`#/channels/ws/messages/${name}`);
      expect(asyncApi.channels.ws.messages[name].$ref).toBe(`#/components/messages/${name}`);
    }
  });

  it('a session through every operation and push sends and receives only documented frames', async () => {
    const building = venue.building.id;
    const floor = venue.floors[0].id;
    const at = (device: string, x: number, y: number, ms = 0) => ({
      device_id: device,
      timestamp: Date.now() - 1000 + ms,
      building_id: building,
      floor_id: floor,
      x,
      y,
    });
    await admin.post('/api/v1/geofences', {
      name: 'Socket zone',
      building_id: building,
      floor_id: floor,
      type: 'POLYGON',
      cartesians: squareCartesians(10, 10, 10),
    });
    await admin.post('/api/v1/events', {
      name: 'Socket event',
      building_id: building,
      position: { floor_id: floor, x: 40, y: 40, radius: 3 },
    });

    // A JSON socket that authenticates with a frame; a msgpack, batched one authenticated on the upgrade.
    const control = await open({ protocol: 'json' });
    expect((await control.request({ op: 'auth', token })).op).toBe('authenticated');
    const batched = await open({ protocol: 'msgpack', query: 'positions=batched', headers: { authorization: `Bearer ${token}` } });
    await batched.next((frame) => frame.op === 'authenticated');
    const batchedEvents = await open({ protocol: 'json', query: 'events=batched', headers: { authorization: `Bearer ${token}` } });
    await batchedEvents.next((frame) => frame.op === 'authenticated');

    expect((await control.request({ op: 'ping' })).op).toBe('pong');
    const topics = [
      `buildings/${building}/positions`,
      `buildings/${building}/geofence-events`,
      `buildings/${building}/alarms`,
      'organization/alarms',
      'buildings/999999/positions',
    ];
    const subscribed = await control.request({ op: 'subscribe', topics });
    expect(subscribed.op === 'error' || subscribed.op === 'subscribed').toBe(true);
    await control.next((frame) => frame.op === 'subscribed');
    await control.next((frame) => frame.op === 'error' && frame.topic === 'buildings/999999/positions');
    expect((await batched.request({ op: 'subscribe', topics: [`buildings/${building}/positions`] })).op).toBe('subscribed');
    expect((await batchedEvents.request({ op: 'subscribe', topics: [`buildings/${building}/geofence-events`] })).op).toBe('subscribed');

    // Uploads: acked, pushed one by one and batched, and a walk into the geofence.
    expect((await control.request({ op: 'upload', poses: [at('walker', 5, 5, 0), at('walker', 15, 15, 10)] })).op).toBe('ack');
    await control.next((frame) => frame.op === 'position');
    await batched.next((frame) => frame.op === 'positions');
    await control.next((frame) => frame.op === 'geofence_event' && frame.data.type === 'enter');
    await batchedEvents.next((frame) => frame.op === 'geofence_events' && frame.data[0].type === 'enter');

    // An event area: pushed to the device's own topic.
    expect((await control.request({ op: 'subscribe', topics: ['devices/walker'] })).op).toBe('subscribed');
    expect((await batchedEvents.request({ op: 'subscribe', topics: ['devices/walker'] })).op).toBe('subscribed');
    expect((await control.request({ op: 'upload', poses: [at('walker', 40, 40, 20)] })).op).toBe('ack');
    await control.next((frame) => frame.op === 'event');
    await batchedEvents.next((frame) => frame.op === 'events');

    // Alarms: live, then replayed to a late subscriber with since_seq.
    expect(
      (await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'walker', building_id: building, floor_id: floor, x: 40, y: 40 }))
        .status,
    ).toBe(201);
    await control.next((frame) => frame.op === 'alarm' && frame.topic === 'organization/alarms');
    const late = await open({ headers: { authorization: `Bearer ${token}` } });
    await late.next((frame) => frame.op === 'authenticated');
    late.send({ op: 'subscribe', topics: ['organization/alarms'], since_seq: 0, id: 'replay' });
    await late.next((frame) => frame.op === 'alarm' && frame.replay === true);
    await late.next((frame) => frame.op === 'subscribed');

    // An evacuation of the building: its start, pushed to the building's evacuation topic.
    expect((await control.request({ op: 'subscribe', topics: [`buildings/${building}/evacuation`] })).op).toBe('subscribed');
    expect((await admin.post(`/api/v1/buildings/${building}/evacuations`, { drill: true })).status).toBe(201);
    await control.next((frame) => frame.op === 'evacuation' && frame.data.kind === 'started');

    // Leaving, and a frame the server does not understand.
    expect((await control.request({ op: 'unsubscribe', topics: ['devices/walker'] })).op).toBe('unsubscribed');
    control.ws.send(JSON.stringify({ op: 'dance', id: 'bad' }));
    await control.next((frame) => frame.op === 'error' && frame.id === 'bad');

    const received = sockets.flatMap((socket) => socket.frames as { op?: string }[]);
    const problems = [...sent.flatMap((frame) => check('client', frame)), ...received.flatMap((frame) => check('server', frame))];
    expect(problems).toEqual([]);
    // The session covered every frame kind the document names, so none of them is checked by nothing.
    const documented = Object.keys(asyncApi.components.messages).sort();
    const seen = new Set([
      ...sent.map((frame) => `client_${(frame as { op: string }).op}`),
      ...received.map((frame) => `server_${frame.op}`),
    ]);
    expect(documented.filter((name) => !seen.has(name))).toEqual([]);
  });
});
