import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createUser, login } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';
import { serverFrameSchema } from '../../gateway/ws/frames.schema.js';
import { WebhookReceiver } from '../../testkit/webhook-receiver.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Issue 31: a building of 200 people on three floors is evacuated; 197 walk, at different speeds, to two
 * assembly points outside the footprint (one polygon, one circle), three stay inside. The roll must reach 197
 * safe by detection alone and list exactly the three still inside, with the last place each reported.
 */
describe(`mustering: the evacuation roll (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let token: string;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  let floors: number[];
  let evacuationId: string;
  let receiver: WebhookReceiver;
  /** Webhook events delivered to the site's pager, by type, each delivery once (a restart may send one again). */
  const delivered = (type: string) =>
    receiver
      .deliveredOnce('/pager')
      .map((receipt) => JSON.parse(receipt.body))
      .filter((body) => body.type === type);
  const waitFor = async (check: () => boolean, timeoutMs = 10_000) => {
    for (let waited = 0; !check() && waited < timeoutMs; waited += 100) await sleep(100);
  };
  const sockets: TestSocket[] = [];
  const base = () => `/api/v1/buildings/${venue.building.id}/evacuations`;
  const socket = async () => {
    const opened = await TestSocket.open(running.baseUrl, { headers: { authorization: `Bearer ${token}` } });
    sockets.push(opened);
    return opened;
  };
  const upload = async (poses: object[]) => {
    const response = await admin.post('/api/v1/realtime/positions', { poses });
    expect(response.status, response.text).toBe(204);
  };
  const current = async () => {
    const response = await (admin as TestClient).get(`${base()}/current`);
    expect(response.status, response.text).toBe(200);
    return response.body;
  };

  // Two assembly points on the ground floor, both outside the 120 x 80 m footprint.
  const pointA = { x: 145, y: 5, size: 10 }; // a polygon: x 140..150, y 0..10
  const pointB = { x: -20, y: 40, radius: 6 }; // a circle
  const people = Array.from({ length: 200 }, (_, index) => ({
    device: `p${String(index).padStart(3, '0')}`,
    user: randomUUID(),
    floor: index % 3,
    x: 10 + ((index * 37) % 100),
    y: 10 + ((index * 53) % 60),
  }));
  // The three who stay: one per floor, listed by floor (ground first) whatever their index.
  const stayers = new Set(['p005', 'p001', 'p009']);
  const lastPlace = new Map<string, { floor_id: number; x: number; y: number }>();
  const pose = (device: string, user: string, floor: number, x: number, y: number) => {
    lastPlace.set(device, { floor_id: floors[floor]!, x, y });
    return { device_id: device, user_id: user, timestamp: Date.now(), building_id: venue.building.id, floor_id: floors[floor], x, y };
  };

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    running = await startTestGateway({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true', WEBHOOK_RETRY_SCHEDULE: '0.2,0.2,1' });
    admin = await adminClient(running.client);
    token = (await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
    venue = await createVenue(admin, 'Muster venue');
    const hook = await admin.post('/api/v1/webhooks', {
      url: receiver.url('/pager'),
      events: ['evacuation.started', 'evacuation.person_safe', 'evacuation.ended'],
    });
    expect(hook.status, hook.text).toBe(201);
    const second = await admin.post('/api/v1/floors', { building_id: venue.building.id, level: 2, level_height: 4.5, name: 'Second' });
    expect(second.status, second.text).toBe(201);
    floors = [venue.floors[0].id, venue.floors[1].id, second.body.id];
  });
  afterAll(async () => {
    for (const opened of sockets) opened.close();
    await running?.stop();
    await receiver?.close();
  });

  it('marks assembly points on closed geofences only, and reads them back', async () => {
    const square = [
      [140, 0],
      [150, 0],
      [150, 10],
      [140, 10],
      [140, 0],
    ];
    const created = await admin.post('/api/v1/geofences', {
      name: 'Car park A',
      building_id: venue.building.id,
      floor_id: floors[0],
      type: 'POLYGON',
      cartesians: square,
      muster_point: true,
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.muster_point).toBe(true);
    expect((await admin.get(`/api/v1/geofences/${created.body.id}`)).body).toMatchObject({ muster_point: true, type: 'POLYGON' });
    const circle = await admin.post('/api/v1/geofences', {
      name: 'Lawn B',
      building_id: venue.building.id,
      floor_id: floors[0],
      type: 'CIRCLE',
      cartesians: [[pointB.x, pointB.y]],
      radius: pointB.radius,
      muster_point: true,
    });
    expect(circle.status, circle.text).toBe(201);
    const line = await admin.post('/api/v1/geofences', {
      name: 'Kerb',
      building_id: venue.building.id,
      floor_id: floors[0],
      type: 'LINE',
      cartesians: [
        [0, -5],
        [50, -5],
      ],
      muster_point: true,
    });
    expect(line.status).toBe(422);
    expect(line.body.errors).toEqual([expect.objectContaining({ field: 'muster_point' })]);
    const plain = await admin.post('/api/v1/geofences', {
      name: 'Door',
      building_id: venue.building.id,
      floor_id: floors[0],
      type: 'POINT',
      cartesians: [[1, 1]],
    });
    expect(plain.body.muster_point).toBe(false);
    expect((await admin.patch(`/api/v1/geofences/${plain.body.id}`, { muster_point: true })).status).toBe(422);
    expect((await admin.get(`/api/v1/geofences/${plain.body.id}`)).body.muster_point).toBe(false);
  });

  it('declares an evacuation with everyone present on the roll, by person; a second one is refused with the active id', async () => {
    // p000 carries a second device (a badge): one person on the roll, not two.
    await upload([...people.map((p) => pose(p.device, p.user, p.floor, p.x, p.y)), pose('p000-badge', people[0]!.user, 0, 12, 12)]);
    // Someone outdoors away from the building is not on the roll.
    await upload([{ device_id: 'passer-by', timestamp: Date.now(), lat: 40.43, lng: -3.69 }]);
    const user = await createUser(admin, 'user');
    expect((await user.client.post(base(), {})).status).toBe(403);
    expect((await admin.post(base(), { floor_ids: [999_999] })).status).toBe(422);
    expect((await admin.post(base(), { unknown: 1 })).status).toBe(422);
    const declared = await admin.post(base(), { note: 'Fire alarm, east wing' });
    expect(declared.status, declared.text).toBe(201);
    evacuationId = declared.body.id;
    expect(declared.body).toMatchObject({
      building_id: venue.building.id,
      note: 'Fire alarm, east wing',
      drill: false,
      active: true,
      started_by: { email: ADMIN_EMAIL },
    });
    expect(declared.body.counts).toEqual({ on_roll: 200, missing: 200, safe: 0, safe_manual: 0, left_site: 0, not_found: 0, arrivals: 0 });
    const first = declared.body.roll.find((entry: { entry: string }) => entry.entry === `user:${people[0]!.user}`);
    expect(first.device_ids).toEqual(['p000', 'p000-badge']);
    expect(declared.body.roll.some((entry: { device_ids: string[] }) => entry.device_ids.includes('passer-by'))).toBe(false);
    const again = await admin.post(base(), { drill: true });
    expect(again.status).toBe(409);
    expect(again.body.message).toContain(evacuationId);
    expect(again.headers.get('location')).toBe(`${base()}/${evacuationId}`);
    const audit = await admin.get(`/api/v1/audit?object_type=evacuations&object_id=${evacuationId}`);
    expect(audit.body.data).toHaveLength(1);
    await waitFor(() => delivered('evacuation.started').length > 0);
    expect(delivered('evacuation.started').map((body) => body.data)).toEqual([
      expect.objectContaining({ id: evacuationId, counts: expect.objectContaining({ on_roll: 200 }) }),
    ]);
  });

  it('marks 197 safe as they reach the assembly points, pushes each change, and lists exactly the three left inside', async () => {
    const watcher = await socket();
    expect((await watcher.request({ op: 'subscribe', topics: [`buildings/${venue.building.id}/evacuation`] })).op).toBe('subscribed');
    const walkers = people.filter((p) => !stayers.has(p.device));
    // Speeds of 1 to 4 legs per tick over a 12-leg walk: half go to A, half to B; upper floors come down halfway.
    const targets = walkers.map((_p, index) => (index % 2 === 0 ? { x: pointA.x, y: pointA.y } : { x: pointB.x, y: pointB.y }));
    const speeds = walkers.map((_, index) => 1 + (index % 4));
    const LEGS = 12;
    for (let tick = 1; tick * 1 <= LEGS; tick++) {
      const poses = walkers.map((p, index) => {
        const progress = Math.min(1, (tick * speeds[index]!) / LEGS);
        const target = targets[index]!;
        const floor = progress >= 0.5 ? 0 : p.floor;
        return pose(p.device, p.user, floor, p.x + (target.x - p.x) * progress, p.y + (target.y - p.y) * progress);
      });
      const stay = people.filter((p) => stayers.has(p.device)).map((p) => pose(p.device, p.user, p.floor, p.x + tick * 0.1, p.y));
      await upload([...poses, ...stay]);
    }
    let roll = await current();
    for (let waited = 0; roll.counts.safe < 197 && waited < 20_000; waited += 250) {
      await sleep(250);
      roll = await current();
    }
    expect(roll.counts).toEqual({ on_roll: 200, missing: 3, safe: 197, safe_manual: 0, left_site: 0, not_found: 0, arrivals: 0 });
    const byDevice = new Map(people.map((p) => [p.device, p]));
    expect(roll.missing.map((entry: { device_ids: string[] }) => entry.device_ids[0])).toEqual(['p009', 'p001', 'p005']);
    for (const entry of roll.missing) {
      const device = entry.device_ids[0] as string;
      expect(entry.entry).toBe(`user:${byDevice.get(device)!.user}`);
      expect(entry.last_position).toMatchObject(lastPlace.get(device)!);
    }
    const safe = roll.roll.filter((entry: { status: string }) => entry.status === 'safe');
    const points = new Set(safe.map((entry: { assembly_point: { name: string } }) => entry.assembly_point.name));
    expect(points).toEqual(new Set(['Car park A', 'Lawn B']));
    await watcher.next(() => watcher.frames.filter((f) => f.op === 'evacuation' && f.data.entry?.status === 'safe').length >= 197, 10_000);
    const pushed = new Set(
      watcher.frames.filter((f) => f.op === 'evacuation' && f.data.entry?.status === 'safe').map((f) => f.data.entry.entry),
    );
    expect(pushed.size).toBe(197);
  });

  it('lists a responder coming in during the evacuation apart, never as missing', async () => {
    await upload([pose('responder-1', randomUUID(), 0, 60, 40)]);
    let roll = await current();
    for (let waited = 0; roll.counts.arrivals < 1 && waited < 5000; waited += 100) {
      await sleep(100);
      roll = await current();
    }
    expect(roll.counts).toMatchObject({ on_roll: 200, missing: 3, arrivals: 1 });
    expect(roll.arrivals[0]).toMatchObject({ device_ids: ['responder-1'], arrival: true });
  });

  it('routes rescuers to a missing person from the nearest assembly point by route, not the first one', async () => {
    // Ground: a corridor along y=40 from Lawn B (-20,40) to below Car park A (145,5), a spur up to y=67 at x=44;
    // stairs at (44,40) to a first-floor corridor towards (48,63). The second floor has no paths.
    const [ground, first] = floors as [number, number];
    const graph = {
      nodes: [
        { id: 1, floor_id: ground, x: -20, y: 40 },
        { id: 2, floor_id: ground, x: 44, y: 40 },
        { id: 3, floor_id: ground, x: 145, y: 40 },
        { id: 4, floor_id: ground, x: 145, y: 5 },
        { id: 5, floor_id: ground, x: 44, y: 67 },
        { id: 6, floor_id: first, x: 44, y: 40 },
        { id: 7, floor_id: first, x: 48, y: 63 },
      ],
      links: [
        { source: 1, target: 2, origin: 'both', accessible: true },
        { source: 2, target: 3, origin: 'both', accessible: true },
        { source: 3, target: 4, origin: 'both', accessible: true },
        { source: 2, target: 5, origin: 'both', accessible: true },
        { source: 2, target: 6, origin: 'both', accessible: false, tags: ['stairs'] },
        { source: 6, target: 7, origin: 'both', accessible: true },
      ],
    };
    const put = await admin.put(`/api/v1/buildings/${venue.building.id}/paths`, graph);
    expect(put.status, put.text).toBe(200);
    const routeTo = (device: string, query = '') => {
      const person = people.find((p) => p.device === device)!;
      return admin.get(`${base()}/${evacuationId}/roll/${encodeURIComponent(`user:${person.user}`)}/route${query}`);
    };

    // p009 stayed on the ground floor at (44.2, 67): 64 m along the corridor from Lawn B, 27 m up the spur; from
    // Car park A (listed first) it would be 35 + 101 + 27 m.
    const ground9 = await routeTo('p009');
    expect(ground9.status, ground9.text).toBe(200);
    expect(ground9.body.entry).toMatchObject({ status: 'missing', last_position: lastPlace.get('p009') });
    expect(ground9.body.assembly_point).toEqual({ id: expect.any(String), name: 'Lawn B' });
    expect(ground9.body.route).toMatchObject({
      building_id: venue.building.id,
      distance_m: 91,
      from: { floor_id: ground, x: -20, y: 40, snap_distance_m: 0 },
      to: { floor_id: ground, x: 44, y: 67, snap_distance_m: 0.2 },
    });
    expect(ground9.body.route.legs.map((leg: { floor_id: number }) => leg.floor_id)).toEqual([ground]);

    // p001 stayed on the first floor: up the stairs; no accessible way there.
    const first1 = await routeTo('p001');
    expect(first1.status, first1.text).toBe(200);
    expect(first1.body.assembly_point.name).toBe('Lawn B');
    expect(first1.body.route.legs.map((leg: { floor_id: number }) => leg.floor_id)).toEqual([ground, first]);
    expect(first1.body.route.steps.some((step: { floor_change?: { via: string } }) => step.floor_change?.via === 'stairs')).toBe(true);
    const accessible = await routeTo('p001', '?accessible=true');
    expect(accessible.status).toBe(422);
    expect(accessible.body.errors).toEqual([expect.objectContaining({ field: 'to' })]);

    // p005 is on the second floor, which has no paths; someone not on the roll is 404.
    const second5 = await routeTo('p005');
    expect(second5.status).toBe(422);
    expect(second5.body.errors).toEqual([expect.objectContaining({ field: 'to' })]);
    const stranger = await admin.get(`${base()}/${evacuationId}/roll/${encodeURIComponent(`user:${randomUUID()}`)}/route`);
    expect(stranger.status).toBe(404);
  });

  it('lets a warden mark a person safe by hand, with a comment; someone not on the roll is 404', async () => {
    const watcher = await socket();
    await watcher.request({ op: 'subscribe', topics: [`buildings/${venue.building.id}/evacuation`] });
    const target = `user:${people[1]!.user}`;
    const marked = await admin.post(`${base()}/${evacuationId}/roll/${encodeURIComponent(target)}/safe`, {
      comment: 'Seen leaving by the loading bay',
    });
    expect(marked.status, marked.text).toBe(200);
    expect(marked.body).toMatchObject({
      entry: target,
      status: 'safe_manual',
      comment: 'Seen leaving by the loading bay',
      marked_by: { email: ADMIN_EMAIL },
    });
    const pushed = await watcher.next((f) => f.op === 'evacuation' && f.data.entry?.entry === target);
    expect(pushed.data).toMatchObject({
      kind: 'entry',
      evacuation_id: evacuationId,
      seq: marked.body.seq,
      entry: { status: 'safe_manual' },
    });
    expect(pushed.data.entry).toEqual(marked.body);
    expect(serverFrameSchema.safeParse(pushed).success).toBe(true);
    const roll = await current();
    expect(roll.counts).toMatchObject({ missing: 2, safe: 197, safe_manual: 1 });
    expect(roll.roll.find((entry: { entry: string }) => entry.entry === target)).toEqual(marked.body);
    expect((await admin.post(`${base()}/${evacuationId}/roll/${encodeURIComponent(`user:${randomUUID()}`)}/safe`, {})).status).toBe(404);
    expect((await admin.post(`${base()}/${randomUUID()}/roll/${encodeURIComponent(target)}/safe`, {})).status).toBe(404);
    expect((await admin.post(`${base()}/${evacuationId}/roll/${encodeURIComponent(target)}/safe`, { comment: 7 })).status).toBe(422);
    const audit = await admin.get(`/api/v1/audit?object_type=evacuation_roll`);
    expect(audit.body.data[0]).toMatchObject({
      object_id: `${evacuationId}/${target}`,
      after: expect.objectContaining({ status: 'safe_manual' }),
    });
  });

  it('lists only the statuses asked for in roll and arrivals (status=), with the counts and the missing whole', async () => {
    const whole = await current();
    const of = (entries: { status: string }[], statuses: string[]) => entries.filter((entry) => statuses.includes(entry.status));
    for (const statuses of [['safe_manual'], ['missing'], ['safe', 'left_site'], ['not_found']]) {
      const response = await admin.get(`${base()}/current?status=${statuses.join(',')}`);
      expect(response.status, response.text).toBe(200);
      expect(response.body).toEqual({ ...whole, roll: of(whole.roll, statuses), arrivals: of(whole.arrivals, statuses) });
    }
    // The hand-marked one, the two left inside (and the responder, missing among the arrivals); repeated keys too.
    const some = (await admin.get(`${base()}/${evacuationId}?status=safe_manual&status=missing`)).body;
    expect(some.roll.map((entry: { status: string }) => entry.status).sort()).toEqual(['missing', 'missing', 'safe_manual']);
    expect(some.arrivals).toHaveLength(1);
    expect(some.missing).toEqual(whole.missing);
    for (const bad of ['lost', '', 'safe,lost']) {
      const refused = await admin.get(`${base()}/current?status=${bad}`);
      expect(refused.status, refused.text).toBe(422);
      expect(refused.body).toMatchObject({ status: 422, code: expect.any(String), message: expect.any(String) });
    }
  });

  it('replays the roll to a screen subscribing with since_seq', async () => {
    const watcher = await socket();
    await watcher.request({ op: 'subscribe', topics: [`buildings/${venue.building.id}/evacuation`], since_seq: 0 });
    await watcher.next(() => watcher.frames.filter((f) => f.op === 'evacuation' && f.data.kind === 'entry').length >= 201);
    const entries = watcher.frames.filter((f) => f.op === 'evacuation' && f.data.kind === 'entry');
    expect(new Set(entries.map((f) => f.data.entry.entry)).size).toBe(201);
    const seqs = entries.map((f) => f.data.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
  });

  it('keeps the roll across a restart, and ends it with the missing recorded as not found', { timeout: 240_000 }, async () => {
    const before = await current();
    running = await running.restart();
    admin = await adminClient(running.client);
    const after = await current();
    expect(after).toEqual(before);
    const ended = await admin.post(`${base()}/current/end`);
    expect(ended.status, ended.text).toBe(200);
    expect(ended.body).toMatchObject({ id: evacuationId, active: false, ended_by: { email: ADMIN_EMAIL } });
    expect(ended.body.counts).toMatchObject({ missing: 0, not_found: 2, safe: 197, safe_manual: 1 });
    expect((await admin.get(`${base()}/current`)).status).toBe(404);
    expect((await admin.get(`${base()}/${evacuationId}`)).body).toEqual(ended.body);
    expect((await admin.post(`${base()}/${evacuationId}/end`)).status).toBe(409);
    // One order for an evacuation's deliveries: once `ended` arrived, every person_safe before it has.
    await waitFor(() => delivered('evacuation.ended').length > 0, 120_000);
    expect(delivered('evacuation.ended').map((body) => body.data)).toEqual([
      expect.objectContaining({ id: evacuationId, counts: ended.body.counts }),
    ]);
    const paged = delivered('evacuation.person_safe');
    expect(paged).toHaveLength(198); // 197 by detection, one by hand
    const safe = ended.body.roll.filter((entry: { status: string }) => entry.status.startsWith('safe'));
    expect(new Set(paged.map((body) => body.data.entry.entry))).toEqual(new Set(safe.map((entry: { entry: string }) => entry.entry)));
    // A new one may be declared once the last has ended; a drill pages nobody.
    const next = await admin.post(base(), { drill: true, floor_ids: [floors[2]] });
    expect(next.status, next.text).toBe(201);
    expect(next.body.drill).toBe(true);
    await sleep(500);
    expect(delivered('evacuation.started')).toHaveLength(1);
  });
});
