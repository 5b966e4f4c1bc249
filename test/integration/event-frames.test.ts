import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AlarmEventMessage } from '../../gateway/alarms/alarm-event-message.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createUser, login } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

/**
 * Events ride like positions: a socket opened with `?events=batched` gets one frame per upload and topic holding
 * all of that upload's geofence events for the topic; others keep one frame per event. Alarms raised together go
 * on the bus as one message and reach sockets one frame per alarm event, in seq order, replayable with since_seq.
 */
describe(`batched event frames and alarms raised together (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let token: string;
  let venues: Awaited<ReturnType<typeof createVenue>>[];
  const sockets: TestSocket[] = [];
  const open = async (query: string, bearer = token) => {
    const socket = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${bearer}` }, query });
    sockets.push(socket);
    await socket.next((frame) => frame.op === 'authenticated');
    return socket;
  };
  const pose = (venue: (typeof venues)[number], device: string, x: number, y: number, extra: object = {}) => ({
    device_id: device,
    timestamp: Date.now(),
    building_id: venue.building.id,
    floor_id: venue.floors[0].id,
    x,
    y,
    ...extra,
  });
  const upload = async (poses: object[]) => expect((await admin.post('/api/v1/realtime/positions', { poses })).status).toBe(204);
  const topicOf = (venue: (typeof venues)[number]) => `buildings/${venue.building.id}/geofence-events`;

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    venues = [await createVenue(admin, 'Frames venue A'), await createVenue(admin, 'Frames venue B')];
    // Three overlapping fences on each venue's ground floor: walking from (1, 1) to (12, 12) enters all three.
    for (const venue of venues) {
      for (const [i, size] of [10, 14, 18].entries()) {
        const response = await admin.post('/api/v1/geofences', {
          name: `Fence ${i}`,
          building_id: venue.building.id,
          floor_id: venue.floors[0].id,
          type: 'POLYGON',
          cartesians: squareCartesians(5, 5, size),
        });
        expect(response.status, response.text).toBe(201);
      }
    }
  });
  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await running?.stop();
  });

  it('an upload that causes k enters in one building reaches a batched subscriber in one frame of k events, a single one in k frames', async () => {
    const [venue] = venues as [(typeof venues)[number]];
    const batched = await open('events=batched');
    const single = await open('');
    for (const socket of [batched, single])
      expect(await socket.request({ op: 'subscribe', topics: [topicOf(venue)] })).toMatchObject({ op: 'subscribed' });
    await upload([pose(venue, 'k-walker-1', 1, 1), pose(venue, 'k-walker-2', 1, 1)]);
    await upload([pose(venue, 'k-walker-1', 12, 12), pose(venue, 'k-walker-2', 12, 12)]);
    const frame = await batched.next((f) => f.op === 'geofence_events');
    expect(frame.topic).toBe(topicOf(venue));
    expect(frame.data).toHaveLength(6);
    expect(frame.data.every((event: { type: string }) => event.type === 'enter')).toBe(true);
    expect(frame.data.map((event: { device_id: string }) => event.device_id)).toEqual([
      'k-walker-1',
      'k-walker-1',
      'k-walker-1',
      'k-walker-2',
      'k-walker-2',
      'k-walker-2',
    ]);
    await single.next(() => single.frames.filter((f) => f.op === 'geofence_event').length === 6);
    await batched.request({ op: 'ping' });
    await single.request({ op: 'ping' });
    expect(batched.frames.filter((f) => f.op === 'geofence_events')).toHaveLength(1);
    expect(batched.frames.some((f) => f.op === 'geofence_event')).toBe(false);
    expect(single.frames.filter((f) => f.op === 'geofence_event').map((f) => f.data)).toEqual(frame.data);
    expect(single.frames.some((f) => f.op === 'geofence_events')).toBe(false);
  });

  it('one upload crossing fences in two buildings gives one frame per building topic', async () => {
    const [a, b] = venues as [(typeof venues)[number], (typeof venues)[number]];
    const batched = await open('events=batched');
    expect(await batched.request({ op: 'subscribe', topics: [topicOf(a), topicOf(b)] })).toMatchObject({ op: 'subscribed' });
    await upload([pose(a, 'two-a', 1, 1), pose(b, 'two-b', 1, 1)]);
    await upload([pose(a, 'two-a', 12, 12), pose(b, 'two-b', 12, 12)]);
    await batched.next((f) => f.op === 'geofence_events' && f.topic === topicOf(a));
    await batched.next((f) => f.op === 'geofence_events' && f.topic === topicOf(b));
    await batched.request({ op: 'ping' });
    // Buildings may be detected by different owners (gateway/cluster), so the two frames come in either order.
    const frames = batched.frames.filter((f) => f.op === 'geofence_events');
    expect(frames).toHaveLength(2);
    expect(
      frames.map((f) => [
        f.topic,
        f.data.length,
        f.data.every((event: { building_id: number }) => `buildings/${event.building_id}/geofence-events` === f.topic),
      ]),
    ).toEqual(
      expect.arrayContaining([
        [topicOf(a), 3, true],
        [topicOf(b), 3, true],
      ]),
    );
  });

  it("a plain user's batched subscriber gets a frame of only the events about them, and none when none is", async () => {
    const [venue] = venues as [(typeof venues)[number]];
    const user = await createUser(admin, 'user');
    const colleague = await createUser(admin, 'user');
    const mine = await open('events=batched', (await login(running.client, user.email, user.password)).access_token);
    const everything = await open('events=batched');
    for (const socket of [mine, everything])
      expect(await socket.request({ op: 'subscribe', topics: [topicOf(venue)] })).toMatchObject({ op: 'subscribed' });
    const walk = (x: number) => [
      pose(venue, 'c-theirs', x, x, { user_id: colleague.user.id }),
      pose(venue, 'c-mine', x, x, { user_id: user.user.id }),
      pose(venue, 'c-nobody', x, x),
    ];
    // The owner may detect uploads read together in one pass, and a batched frame then holds the events of all of
    // them: each step waits for its events to be pushed, so the last upload's (about a colleague only) are a pass
    // of their own.
    const pushed = (socket: typeof everything) =>
      socket.frames.filter((f) => f.op === 'geofence_events').flatMap((f) => f.data as { type: string }[]);
    await upload(walk(1));
    await upload(walk(12));
    await everything.next(() => pushed(everything).length >= 9);
    const own = await mine.next((f) => f.op === 'geofence_events');
    await upload([pose(venue, 'c-theirs', 1, 1, { user_id: colleague.user.id })]);
    await everything.next((f) => f.op === 'geofence_events' && f.data[0].type === 'exit');
    await mine.request({ op: 'ping' });
    expect(own.data.map((event: { device_id: string; user_id: string }) => [event.device_id, event.user_id])).toEqual(
      Array(3).fill(['c-mine', user.user.id]),
    );
    expect(mine.frames.filter((f) => f.op === 'geofence_events')).toHaveLength(1);
    expect(pushed(everything).map((event) => event.type)).toEqual([...Array(9).fill('enter'), ...Array(3).fill('exit')]);
    expect(everything.frames.filter((f) => f.op === 'geofence_events').at(-1).data).toHaveLength(3);
  });

  it('alarms raised together are one bus message, arrive in seq order with consecutive seqs, and a replay after reconnecting loses none', async () => {
    const [venue] = venues as [(typeof venues)[number]];
    const announced: (readonly AlarmEventMessage[])[] = [];
    const unsubscribe = await running.gateway.services.bus.subscribe('alarms', (messages) => announced.push(messages));
    try {
      const live = await open('events=batched');
      expect(await live.request({ op: 'subscribe', topics: ['organization/alarms'] })).toMatchObject({ op: 'subscribed' });
      const devices = ['together-1', 'together-2', 'together-3', 'together-4'];
      await upload(
        devices.map((device, i) => pose(venue, device, 30 + i, 30, i % 2 === 0 ? { danger: true } : { assistance_request: true })),
      );
      const frames = [];
      for (const device of devices) frames.push(await live.next((f) => f.op === 'alarm' && f.data.device_id === device));
      const seqs = frames.map((f) => f.data.seq as number);
      expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));
      expect(live.frames.filter((f) => f.op === 'alarm').map((f) => f.data.seq)).toEqual(seqs);
      const together = announced.find((message) => message.some((event) => event.event.device_id === 'together-1'));
      expect(together?.map((event) => event.event.seq)).toEqual(seqs);

      // The control room drops; four more are raised together meanwhile; it resumes from the last seq it saw.
      live.close();
      await upload(devices.map((device, i) => pose(venue, `${device}-later`, 30 + i, 30, { danger: true })));
      const resumed = await open('events=batched');
      const subscribed = resumed.request({ op: 'subscribe', topics: ['organization/alarms'], since_seq: seqs.at(-1)! }, 15_000);
      expect(await subscribed).toMatchObject({ op: 'subscribed' });
      // Raised after the replay: live again, right after the replayed ones.
      expect(
        (await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'together-after', building_id: venue.building.id })).status,
      ).toBe(201);
      await resumed.next((f) => f.op === 'alarm' && f.data.device_id === 'together-after');
      const after = resumed.frames.filter((f) => f.op === 'alarm');
      expect(after.map((f) => f.data.seq)).toEqual(Array.from({ length: 5 }, (_, i) => seqs.at(-1)! + 1 + i));
      expect(after.map((f) => [f.data.device_id, f.replay === true])).toEqual([
        ...devices.map((device) => [`${device}-later`, true]),
        ['together-after', false],
      ]);
    } finally {
      await unsubscribe();
    }
  });
});
