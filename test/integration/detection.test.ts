import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createUser, login } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe(`detection and alarms end to end (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let token: string;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  const sockets: TestSocket[] = [];
  const socket = async () => {
    const opened = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    sockets.push(opened);
    return opened;
  };
  const at = (deviceId: string, x: number, y: number, extra: object = {}) => ({
    device_id: deviceId,
    timestamp: Date.now(),
    building_id: venue.building.id,
    floor_id: venue.floors[0].id,
    x,
    y,
    ...extra,
  });
  const upload = async (...poses: object[]) => expect((await admin.post('/api/v1/realtime/positions', { poses })).status).toBe(204);
  const zoneEventsOf = (deviceId: string) =>
    running.gateway.services.storage.execute<{ zone_id: string; type: string }>(
      'select zone_id, type from zone_events where device_id = ? order by at',
      [deviceId],
    );

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    venue = await createVenue(admin, 'Detection venue');
  });
  afterAll(async () => {
    for (const opened of sockets) opened.close();
    await running?.stop();
  });

  it('boots with every step of the hot path listed, detection included, and detects with nothing to register', async () => {
    const { pipeline, detection } = running.gateway.services;
    expect(pipeline.steps.map((step) => step.name)).toEqual([
      'validate',
      'georeference',
      'refuse-invalid',
      'resolve-devices',
      'tracking-window',
      'raise-requested-alarms',
      'pace-to-detection',
      'publish',
      'persist',
      'hand-to-owners',
    ]);
    const place = { building_id: venue.building.id, floor_id: venue.floors[0].id };
    const fence = (
      await admin.post('/api/v1/geofences', { name: 'Boot', ...place, type: 'POLYGON', cartesians: squareCartesians(60, 60, 10) })
    ).body;
    await upload(at('booted', 65, 65));
    // Handed to the owner (this gateway), whose engine now tracks the device and stored its enter.
    for (let wait = 0; wait < 50 && (await zoneEventsOf('booted')).length === 0; wait++) await sleep(100);
    expect(await zoneEventsOf('booted')).toEqual([{ zone_id: fence.id, type: 'enter' }]);
    expect(detection.engine.trackedDevicesIn(venue.building.id)).toBeGreaterThan(0);
  });

  it('pushes geofence enter and exit to subscribers and keeps them for reports', async () => {
    const fence = (
      await admin.post('/api/v1/geofences', {
        name: 'Ward A',
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'POLYGON',
        cartesians: squareCartesians(10, 10, 10),
      })
    ).body;
    const watcher = await socket();
    expect((await watcher.request({ op: 'subscribe', topics: [`buildings/${venue.building.id}/geofence-events`] })).op).toBe('subscribed');
    await upload(at('walker', 5, 5));
    await upload(at('walker', 15, 15));
    const enter = await watcher.next((f) => f.op === 'geofence_event' && f.data.type === 'enter');
    expect(enter.data).toMatchObject({
      geofence_id: fence.id,
      zone_name: 'Ward A',
      device_id: 'walker',
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
    });
    await upload(at('walker', 30, 30));
    const exit = await watcher.next((f) => f.op === 'geofence_event' && f.data.type === 'exit');
    expect(exit.data.geofence_id).toBe(fence.id);
    const stored = await running.gateway.services.storage.execute<{ type: string }>(
      "select type from zone_events where device_id = 'walker' and zone_kind = 'geofence' order by at, type",
    );
    expect(stored.map((row) => row.type)).toEqual(['enter', 'exit']);
  });

  it('tests polygons exactly: inside the bounding box but outside a concave polygon is not inside', async () => {
    // An L shape: the notch (25..30, 25..30) is inside the bbox but outside the polygon.
    const fence = (
      await admin.post('/api/v1/geofences', {
        name: 'L',
        building_id: venue.building.id,
        floor_id: venue.floors[1].id,
        type: 'POLYGON',
        cartesians: [
          [20, 20],
          [30, 20],
          [30, 25],
          [25, 25],
          [25, 30],
          [20, 30],
          [20, 20],
        ],
      })
    ).body;
    await upload({ ...at('notch', 28, 28), floor_id: venue.floors[1].id });
    await upload({ ...at('elbow', 22, 22), floor_id: venue.floors[1].id });
    await sleep(100);
    const rows = await running.gateway.services.storage.execute<{ device_id: string }>(
      'select device_id from zone_events where zone_id = ?',
      [fence.id],
    );
    expect(rows.map((row) => row.device_id)).toEqual(['elbow']);
  });

  it('rebuilds the index when a geofence is added: the next position sees it', async () => {
    await upload(at('late', 70, 50));
    const fence = (
      await admin.post('/api/v1/geofences', {
        name: 'New',
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'CIRCLE',
        cartesians: [[70, 50]],
        radius: 3,
      })
    ).body;
    await upload(at('late', 70.5, 50));
    await sleep(100);
    const rows = await running.gateway.services.storage.execute<{ type: string }>('select type from zone_events where zone_id = ?', [
      fence.id,
    ]);
    expect(rows.map((row) => row.type)).toEqual(['enter']);
  });

  it('raises GEOFENCE_MAX_STAY_TIME once per stay, stored and pushed', async () => {
    const fence = (
      await admin.post('/api/v1/geofences', {
        name: 'Quiet room',
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'CIRCLE',
        cartesians: [[40, 40]],
        radius: 4,
        max_stay_time: 1,
      })
    ).body;
    const control = await socket();
    await control.request({ op: 'subscribe', topics: ['organization/alarms'] });
    await upload(at('sitter', 40, 40));
    const alarm = await control.next(
      (f) => f.op === 'alarm' && f.data.type === 'GEOFENCE_MAX_STAY_TIME' && f.data.device_id === 'sitter',
      8000,
    );
    expect(alarm.data).toMatchObject({ state: 'OPEN', geofence_id: fence.id, building_id: venue.building.id, event: 'raised' });
    expect(alarm.data.details.max_stay_time).toBe(1);
    await upload(at('sitter', 40.5, 40));
    await sleep(1500);
    const listed = await admin.get(`/api/v1/alarms?type=GEOFENCE_MAX_STAY_TIME&device_id=sitter`);
    expect(listed.body.data).toHaveLength(1);
    expect(listed.body.data[0].occurrences).toBe(1);
  });

  it('raises DEADMAN for a device that stops reporting inside the building, and for one lying still', async () => {
    expect(
      (
        await admin.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, {
          deadman_silence_s: 1,
          deadman_after_s: 1,
          deadman_radius_m: 2,
        })
      ).body,
    ).toMatchObject({ deadman_silence_s: 1 });
    const control = await socket();
    await control.request({ op: 'subscribe', topics: [`buildings/${venue.building.id}/alarms`] });
    await upload(at('faller', 60, 60));
    await sleep(1200);
    await upload(at('faller', 60.3, 60)); // still within 2 m after more than 1 s
    const still = await control.next((f) => f.op === 'alarm' && f.data.type === 'DEADMAN' && f.data.details.reason === 'still', 8000);
    expect(still.data.device_id).toBe('faller');
    const silent = await control.next(
      (f) => f.op === 'alarm' && f.data.type === 'DEADMAN' && f.data.device_id === 'faller' && f.data.details.reason === 'silence',
      8000,
    );
    // The same OPEN DEADMAN alarm of the device is updated rather than a second one raised.
    expect(silent.data.id).toBe(still.data.id);
    await admin.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, {
      deadman_silence_s: null,
      deadman_after_s: null,
      deadman_radius_m: null,
    });
  });

  it('raises DANGER from a pose flag and through the API, updating the one OPEN alarm on repeats', async () => {
    const control = await socket();
    await control.request({ op: 'subscribe', topics: ['organization/alarms'] });
    await upload(at('panic', 50, 20, { danger: true }));
    const first = await control.next((f) => f.op === 'alarm' && f.data.type === 'DANGER' && f.data.device_id === 'panic');
    expect(first.data).toMatchObject({
      state: 'OPEN',
      event: 'raised',
      position: { floor_id: venue.floors[0].id, cartesians: { x: 50, y: 20 } },
    });
    const again = await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'panic', building_id: venue.building.id });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id: first.data.id, occurrences: 2 });
    expect(again.body.seq).toBeGreaterThan(first.data.seq);
    const assistance = await admin.post('/api/v1/alarms', {
      type: 'ASSISTANCE_REQUEST',
      device_id: 'panic',
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x: 10,
      y: 10,
    });
    expect(assistance.status).toBe(201);
    expect(assistance.body.position.georeferences).not.toBeNull();
  });

  it('stores a keyed raise once however often it is retried, concurrently or later: one alarm, one event', async () => {
    const { alarms, storage } = running.gateway.services;
    const organizationId: string = (await admin.get('/api/v1/organizations/current_organization')).body.id;
    const request = {
      organizationId,
      type: 'GEOFENCE_MAX_STAY_TIME' as const,
      deviceId: 'retried',
      by: 'system' as const,
      idempotencyKey: `max-stay|retried|fence|${Date.now()}`,
    };
    const raiseOnce = async (keyed: typeof request) => (await alarms.raiseAllOnce([keyed]))[0];
    const results = await Promise.all(Array.from({ length: 4 }, () => raiseOnce(request)));
    results.push(await raiseOnce(request));
    expect(results.filter((result) => result !== undefined).map((result) => result!.event.event)).toEqual(['raised']);
    const rows = await storage.execute<{ occurrences: number }>("select occurrences from alarms where device_id = 'retried'");
    expect(rows).toEqual([{ occurrences: 1 }]);
    const events = await storage.execute(
      "select e.seq from alarm_events e join alarms a on a.id = e.alarm_id where a.device_id = 'retried'",
    );
    expect(events).toHaveLength(1);
    // A different condition of the same device and kind still counts as a repeat of the OPEN alarm.
    expect((await raiseOnce({ ...request, idempotencyKey: `${request.idempotencyKey}-2` }))?.event).toMatchObject({
      event: 'updated',
      occurrences: 2,
    });
  });

  it('turns concurrent repeats into one OPEN alarm, each repeat with its own seq', async () => {
    const repeats = await Promise.all(
      Array.from({ length: 12 }, () => admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'hammered' })),
    );
    expect(repeats.every((r) => r.status === 200 || r.status === 201)).toBe(true);
    expect(repeats.filter((r) => r.status === 201)).toHaveLength(1);
    expect(new Set(repeats.map((r) => r.body.id)).size).toBe(1);
    const seqs = repeats.map((r) => Number(r.body.seq)).sort((a, b) => a - b);
    expect(new Set(seqs).size).toBe(12);
    const latest = repeats.find((r) => Number(r.body.seq) === seqs.at(-1))!;
    expect(latest.body.occurrences).toBe(12);
  });

  it('moves alarms along the transition table only, recording who and when', async () => {
    const raised = (await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'lifecycle' })).body;
    const confirmed = await admin.patch(`/api/v1/alarms/${raised.id}`, { state: 'CONFIRMED', comment: 'on my way' });
    expect(confirmed.status).toBe(200);
    const closed = await admin.patch(`/api/v1/alarms/${raised.id}`, { state: 'CLOSED', comment: 'attended' });
    expect(closed.body.state).toBe('CLOSED');
    expect(closed.body.history.map((h: { state: string }) => h.state)).toEqual(['OPEN', 'CONFIRMED', 'CLOSED']);
    expect(closed.body.history[1]).toMatchObject({ from: 'OPEN', comment: 'on my way', by: { email: ADMIN_EMAIL } });
    const reopened = await admin.patch(`/api/v1/alarms/${raised.id}`, { state: 'OPEN' });
    expect(reopened.status).toBe(409);
    expect(reopened.body.code).toBe('conflict');
    // Once closed, a new DANGER of the same device is a new alarm.
    const next = await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'lifecycle' });
    expect(next.status).toBe(201);
    expect(next.body.id).not.toBe(raised.id);
    const user = await createUser(admin, 'user');
    expect((await user.client.patch(`/api/v1/alarms/${next.body.id}`, { state: 'CLOSED' })).status).toBe(403);
  });

  it('lists alarms with filters, newest first', async () => {
    const list = await admin.get('/api/v1/alarms?type=DANGER&state=OPEN&size=100');
    expect(list.status).toBe(200);
    expect(list.body.data.every((a: { type: string; state: string }) => a.type === 'DANGER' && a.state === 'OPEN')).toBe(true);
    const seqs = list.body.data.map((a: { created_at: string }) => a.created_at);
    expect([...seqs].sort().reverse()).toEqual(seqs);
    expect(list.body.metadata.total_elements).toBe(list.body.data.length);
  });

  it('pushes an event’s content to the device topic when the device enters its trigger area', async () => {
    await admin.post('/api/v1/events', {
      building_id: venue.building.id,
      name: 'Coffee promo',
      info: '<p>2x1 today</p>',
      position: { floor_id: venue.floors[0].id, radius: 3, cartesians: { x: 90, y: 10 } },
    });
    await upload(at('shopper', 80, 10));
    const phone = await socket();
    expect((await phone.request({ op: 'subscribe', topics: ['devices/shopper'] })).op).toBe('subscribed');
    await upload(at('shopper', 90, 10));
    const pushed = await phone.next((f) => f.op === 'event');
    expect(pushed).toMatchObject({ topic: 'devices/shopper', data: { name: 'Coffee promo', info: '<p>2x1 today</p>' } });
  });

  it('replays every alarm after since_seq, in order, then goes live with no gap and no duplicate', async () => {
    const first = await socket();
    await first.request({ op: 'subscribe', topics: ['organization/alarms'] });
    const burst = (from: number, count: number) =>
      Promise.all(
        Array.from({ length: count }, (_, i) =>
          admin.post('/api/v1/alarms', { type: 'ASSISTANCE_REQUEST', device_id: `burst-${from + i}` }),
        ),
      );
    await burst(0, 10);
    await first.next((f) => f.op === 'alarm' && f.data.device_id === 'burst-9');
    const seen = first.frames.filter((f) => f.op === 'alarm').map((f) => f.data.seq as number);
    const lastSeen = Math.max(...seen);
    first.close();
    // While disconnected, more alarms happen; the reconnecting subscriber asks for everything after lastSeen,
    // and more arrive during the replay itself.
    await burst(10, 10);
    const second = await socket();
    const during = burst(20, 10);
    const subscribed = second.request({ op: 'subscribe', topics: ['organization/alarms'], since_seq: lastSeen }, 15_000);
    await Promise.all([during, subscribed]);
    await burst(30, 5);
    const [{ max }] = (await running.gateway.services.storage.execute<{ max: string }>('select max(seq) as max from alarm_events')) as [
      { max: string },
    ];
    await second.next((f) => f.op === 'alarm' && f.data.seq === Number(max), 10_000);
    const received = second.frames.filter((f) => f.op === 'alarm').map((f) => f.data.seq as number);
    const expected = Array.from({ length: Number(max) - lastSeen }, (_, i) => lastSeen + 1 + i);
    expect(received).toEqual(expected);
  });
});
