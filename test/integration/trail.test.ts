import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createOrganization, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import type { TrailPoint } from '../../gateway/history/trail-service.js';

/**
 * A device's trail with each fix's arrival (issue 30 item 6, docs/event-time.md): `GET /api/v1/buildings/{id}/trail`.
 * Fixes go up through the real upload API, on time and from an offline buffer, and come back ordered by fix time
 * with when they reached us and whether they came late (more than the reorder window, 2 s, after they were taken).
 */

type Venue = Awaited<ReturnType<typeof createVenue>>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const fieldsOf = (response: { body: { errors?: { field: string }[] } }) => (response.body.errors ?? []).map((error) => error.field);
const query = (params: Record<string, string | number | undefined>) =>
  new URLSearchParams(
    Object.entries(params)
      .filter((entry): entry is [string, string | number] => entry[1] !== undefined)
      .map(([k, v]) => [k, String(v)]),
  ).toString();

describe(`device trail with arrival times (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Venue;

  const pose = (deviceId: string, timestamp: number, x: number, y: number, floor = 0) => ({
    device_id: deviceId,
    timestamp,
    building_id: venue.building.id,
    floor_id: venue.floors[floor].id,
    x,
    y,
  });
  /** Uploads through the API; returns when the request left and when its answer came (what received_at lies between). */
  const upload = async (client: TestClient, poses: object[]) => {
    const sent = Date.now();
    const response = await client.post('/api/v1/realtime/positions', { poses });
    expect(response.status, response.text).toBe(204);
    return { sent, answered: Date.now() };
  };
  const trail = (
    client: TestClient,
    params: Record<string, string | number | undefined>,
    buildingId: number | string = venue.building.id,
  ) => client.get(`/api/v1/buildings/${buildingId}/trail?${query(params)}`);

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Trail venue');
  });
  afterAll(async () => running?.stop());

  it('reads back every fix at its own time, with its arrival, delay and whether it came late', async () => {
    const device = 'trail-walker';
    // Minutes ago, offline: a buffer of three fixes, uploaded later, newest first (as some apps do).
    const past = Date.now() - 6 * 60_000;
    const buffer = [pose(device, past, 1, 1), pose(device, past + 60_000, 2, 1), pose(device, past + 120_000, 3, 1)];
    // On time: a fix now, then 6 s offline (a lift) with three fixes buffered, then a live fix, then the buffer.
    const a = Date.now();
    const onTimeA = await upload(admin, [pose(device, a, 10, 10)]);
    const lift = [pose(device, a + 1000, 11, 10, 1), pose(device, a + 2000, 12, 10, 1), pose(device, a + 3000, 13, 10, 1)];
    await sleep(6000);
    const c = Date.now();
    const onTimeC = await upload(admin, [pose(device, c, 14, 10, 1)]);
    const liftArrival = await upload(admin, lift);
    const bufferArrival = await upload(admin, [...buffer].reverse());
    // The app resends the buffer (no answer reached it): stored twice, read once, at its first arrival.
    await upload(admin, buffer);

    const response = await trail(admin, { device_id: device, from: new Date(past - 1000).toISOString() });
    expect(response.status, response.text).toBe(200);
    const body = response.body as { data: TrailPoint[]; late_count: number; truncated: boolean; reorder_window_ms: number };
    expect(body).toMatchObject({ device_id: device, building_id: venue.building.id, reorder_window_ms: 2000, truncated: false });
    const sent = [...buffer, pose(device, a, 10, 10), ...lift, pose(device, c, 14, 10, 1)];
    expect(body.data.map(({ ts, floor_id, x, y }) => ({ ts, floor_id, x, y }))).toEqual(
      sent.map((fix) => ({ ts: new Date(fix.timestamp).toISOString(), floor_id: fix.floor_id, x: fix.x, y: fix.y })),
    );
    const arrivals = [bufferArrival, bufferArrival, bufferArrival, onTimeA, liftArrival, liftArrival, liftArrival, onTimeC];
    body.data.forEach((point, index) => {
      const received = Date.parse(point.received_at);
      expect(received, `${index}: ${JSON.stringify(point)}`).toBeGreaterThanOrEqual(arrivals[index]!.sent);
      expect(received, `${index}: ${JSON.stringify(point)}`).toBeLessThanOrEqual(arrivals[index]!.answered);
      expect(point.delay_ms).toBe(received - Date.parse(point.ts));
    });
    expect(body.data.map((point) => point.late)).toEqual([true, true, true, false, true, true, true, false]);
    expect(body.late_count).toBe(6);
    // The buffer's oldest fix is the latest, by about six minutes; even the lift's newest came over 2 s late (taken 3 s into 6 s offline).
    expect(body.data[0]!.delay_ms).toBeGreaterThan(6 * 60_000 - 1000);
    expect(body.data[6]!.delay_ms).toBeGreaterThan(2000);

    // `to` is exclusive, `from` inclusive: the lift alone.
    const lifted = await trail(admin, {
      device_id: device,
      from: new Date(a + 1000).toISOString(),
      to: new Date(a + 3000).toISOString().replace('Z', '+00:00'),
    });
    expect(lifted.status, lifted.text).toBe(200);
    expect(lifted.body.data.map((point: TrailPoint) => point.ts)).toEqual([a + 1000, a + 2000].map((t) => new Date(t).toISOString()));
    expect(lifted.body.late_count).toBe(2);
  }, 60_000);

  it('sends the newest `limit` fixes of a longer range, oldest first, and says it was cut', async () => {
    const t0 = Date.now() - 30 * 60_000;
    await upload(
      admin,
      Array.from({ length: 5 }, (_, i) => pose('trail-cut', t0 + i * 1000, i, 0)),
    );
    const cut = await trail(admin, { device_id: 'trail-cut', from: new Date(t0).toISOString(), limit: 2 });
    expect(cut.status, cut.text).toBe(200);
    expect(cut.body.truncated).toBe(true);
    expect(cut.body.data.map((point: TrailPoint) => point.x)).toEqual([3, 4]);
    const whole = await trail(admin, { device_id: 'trail-cut', from: new Date(t0).toISOString(), limit: 5 });
    expect(whole.body.truncated).toBe(false);
    expect(whole.body.data.map((point: TrailPoint) => point.x)).toEqual([0, 1, 2, 3, 4]);
  });

  it('answers 422 naming the field for a bad device, range, limit or building id', async () => {
    const from = new Date(Date.now() - 3600_000).toISOString();
    const cases: [Record<string, string | number | undefined>, string][] = [
      [{ from }, 'query.device_id'],
      [{ device_id: '', from }, 'query.device_id'],
      [{ device_id: '   ', from }, 'query.device_id'],
      [{ device_id: 'x'.repeat(201), from }, 'query.device_id'],
      [{ device_id: 'd' }, 'query.from'],
      [{ device_id: 'd', from: 'yesterday' }, 'query.from'],
      [{ device_id: 'd', from: '2026-02-30T00:00:00Z' }, 'query.from'],
      [{ device_id: 'd', from, to: 'soon' }, 'query.to'],
      [{ device_id: 'd', from, to: from }, 'query.to'],
      [{ device_id: 'd', from, to: new Date(Date.parse(from) - 1).toISOString() }, 'query.to'],
      [{ device_id: 'd', from, to: new Date(Date.parse(from) + 24 * 3600_000 + 1).toISOString() }, 'query.to'],
      // From more than a day ago, to defaulting to now.
      [{ device_id: 'd', from: new Date(Date.now() - 25 * 3600_000).toISOString() }, 'query.to'],
      [{ device_id: 'd', from, limit: 0 }, 'query.limit'],
      [{ device_id: 'd', from, limit: 10_001 }, 'query.limit'],
      [{ device_id: 'd', from, limit: 'many' }, 'query.limit'],
      [{ device_id: 'd', from, limit: 2.5 }, 'query.limit'],
    ];
    for (const [params, field] of cases) {
      const response = await trail(admin, params);
      expect(response.status, `${JSON.stringify(params)}: ${response.text}`).toBe(422);
      expect(response.body.code).toBe('validation_failed');
      expect(fieldsOf(response), JSON.stringify(params)).toContain(field);
    }
    for (const buildingId of ['abc', '0', '-1', '1.5']) {
      const response = await trail(admin, { device_id: 'd', from }, buildingId);
      expect(response.status, `${buildingId}: ${response.text}`).toBe(422);
      expect(fieldsOf(response)).toContain('path.building_id');
    }
    expect((await trail(admin, { device_id: 'd', from }, 999_999_999)).status).toBe(404);
    const twice = await admin.get(`/api/v1/buildings/${venue.building.id}/trail?device_id=a&device_id=b&from=${encodeURIComponent(from)}`);
    expect(twice.status).toBe(422);
    expect(fieldsOf(twice)).toContain('query.device_id');
    // 24 hours exactly is allowed.
    expect((await trail(admin, { device_id: 'd', from, to: new Date(Date.parse(from) + 24 * 3600_000).toISOString() })).status).toBe(200);
  });

  it("shows a plain user only their own fixes, another organization's building not at all", async () => {
    const member = await createUser(admin, 'user');
    const manager = await createUser(admin, 'user_manager');
    const t = Date.now() - 60_000;
    await upload(member.client, [pose('member-phone', t, 5, 5)]);
    await upload(admin, [pose('staff-tag', t, 6, 6)]);
    const from = new Date(t - 1000).toISOString();
    const xs = async (client: TestClient, device: string) => {
      const response = await trail(client, { device_id: device, from });
      expect(response.status, response.text).toBe(200);
      return response.body.data.map((point: TrailPoint) => point.x);
    };
    expect(await xs(member.client, 'member-phone')).toEqual([5]);
    expect(await xs(member.client, 'staff-tag')).toEqual([]);
    expect(await xs(manager.client, 'member-phone')).toEqual([5]);
    expect(await xs(manager.client, 'staff-tag')).toEqual([6]);
    expect(await xs(admin, 'member-phone')).toEqual([5]);

    const foreign = await createOrganization(admin);
    const intruder = await trail(foreign.client, { device_id: 'staff-tag', from });
    expect(intruder.status, intruder.text).toBe(404);
    expect(intruder.text).not.toContain('staff-tag');
    expect((await running.client.get(`/api/v1/buildings/${venue.building.id}/trail?device_id=staff-tag&from=${from}`)).status).toBe(401);
  });

  it('refuses to name a device to whoever the organization makes reports pseudonymous for (422), as the reports do', async () => {
    const other = await createOrganization(admin);
    const otherVenue = await createVenue(other.client, 'Pseudonymous trail venue');
    const manager = await createUser(other.client, 'user_manager');
    const t = Date.now() - 60_000;
    const response = await other.client.post('/api/v1/realtime/positions', {
      poses: [{ device_id: 'named-tag', timestamp: t, building_id: otherVenue.building.id, floor_id: otherVenue.floors[0].id, x: 1, y: 1 }],
    });
    expect(response.status, response.text).toBe(204);
    const from = new Date(t - 1000).toISOString();
    const read = (client: TestClient) => trail(client, { device_id: 'named-tag', from }, otherVenue.building.id);
    expect((await read(manager.client)).status).toBe(200);
    const settings = await other.client.put('/api/v1/organizations/current_organization/privacy_settings', { reports_pseudonymous: true });
    expect(settings.status, settings.text).toBe(200);
    const refused = await read(manager.client);
    expect(refused.status, refused.text).toBe(422);
    expect(fieldsOf(refused)).toEqual(['query.device_id']);
    const asAdmin = await read(other.client);
    expect(asAdmin.status, asAdmin.text).toBe(200);
    expect(asAdmin.body.data).toHaveLength(1);
  });
});
