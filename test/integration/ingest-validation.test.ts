import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const upload = (client: TestClient, poses: object[]) => client.post('/api/v1/realtime/positions', { poses });
const HOUR = 3600_000;
const DAY = 24 * HOUR;

/** Issue 13 items 2, 4, 9 and issue 14 item 1: what an upload (or any request) may carry, and who may send it. */
describe(`ingest validation: physical ranges, characters PostgreSQL refuses, upload ownership (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  const storedCount = async (deviceId: string) =>
    Number(
      (
        await running.gateway.services.storage.execute<{ n: number }>('select count(*)::int as n from positions where device_id = ?', [
          deviceId,
        ])
      )[0]!.n,
    );
  const indoor = (deviceId: string, extra: object = {}) => ({
    device_id: deviceId,
    timestamp: Date.now(),
    building_id: venue.building.id,
    floor_id: venue.floors[0].id,
    x: 3,
    y: 4,
    ...extra,
  });

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Validation venue');
  });
  afterAll(async () => running?.stop());

  it('refuses x/y farther from the building than any floor could reach, naming the pose and field', async () => {
    const response = await upload(admin, [indoor('far-ok'), indoor('far-x', { x: 1e20 }), indoor('far-y', { y: -20_001 })]);
    expect(response.status, response.text).toBe(422);
    const fields = response.body.errors.map((e: { field: string }) => e.field);
    expect(fields).toEqual(expect.arrayContaining(['poses.1.x', 'poses.2.y']));
    expect(await storedCount('far-ok')).toBe(0);
  });

  it('refuses the pose whose derived longitude is not finite, and another tenant-batch committed together still succeeds', async () => {
    // On the rotated venue these once derived a NaN longitude and failed the whole shared commit.
    const [bad, good] = await Promise.all([
      upload(admin, [indoor('nan-bad', { x: 1.7e308, y: -1.7e308 })]),
      upload(admin, [indoor('nan-good')]),
    ]);
    expect(bad.status, bad.text).toBe(422);
    expect(bad.body.errors[0].field).toMatch(/^poses\.0\.(x|y)$/);
    expect(good.status, good.text).toBe(204);
    expect(await storedCount('nan-good')).toBe(1);
  });

  it('accepts timestamps within [now - POSITIONS_MAX_AGE_SECONDS, now + 5 min] and refuses those outside', async () => {
    const now = Date.now();
    const inside = await upload(admin, [
      { device_id: 'window-old', timestamp: now - 6 * DAY, lat: 1, lng: 1 },
      { device_id: 'window-ahead', timestamp: now + 4 * 60_000, lat: 1, lng: 1 },
    ]);
    expect(inside.status, inside.text).toBe(204);
    const outside = await upload(admin, [
      { device_id: 'window-ok', timestamp: now, lat: 1, lng: 1 },
      { device_id: 'window-ancient', timestamp: now - 8 * DAY, lat: 1, lng: 1 },
      { device_id: 'window-1970', timestamp: 1, lat: 1, lng: 1 },
      { device_id: 'window-future', timestamp: now + 6 * 60_000, lat: 1, lng: 1 },
    ]);
    expect(outside.status, outside.text).toBe(422);
    expect(outside.body.errors.map((e: { field: string }) => e.field)).toEqual([
      'poses.1.timestamp',
      'poses.2.timestamp',
      'poses.3.timestamp',
    ]);
    expect(await storedCount('window-ok')).toBe(0);
  });

  it('creates the partition of a back-dated day before the commit, so accepted old fixes are stored', async () => {
    const days = Array.from({ length: 7 }, (_, i) => Date.now() - i * DAY - HOUR);
    const response = await upload(
      admin,
      days.map((timestamp) => ({ device_id: 'back-dated', timestamp, lat: 1, lng: 1 })),
    );
    expect(response.status, response.text).toBe(204);
    expect(await storedCount('back-dated')).toBe(7);
  });

  it("has today's partition and the next three days' ready from boot, before any upload needs them", async () => {
    const names = (
      await running.gateway.services.storage.execute<{ name: string }>(
        "select relname as name from pg_class where relname like 'positions_p%'",
      )
    ).map((row) => row.name);
    for (let i = 0; i <= 3; i++)
      expect(names).toContain(`positions_p${new Date(Date.now() + i * DAY).toISOString().slice(0, 10).replace(/-/g, '')}`);
  });

  it('refuses a NUL or a lone surrogate in a device_id with 422 naming the pose', async () => {
    const nul = await upload(admin, [{ device_id: 'nul\u0000phone', timestamp: Date.now(), lat: 1, lng: 1 }]);
    expect(nul.status, nul.text).toBe(422);
    expect(nul.body.errors[0].field).toBe('poses.0.device_id');
    const surrogate = await upload(admin, [{ device_id: 'half\ud800', timestamp: Date.now(), lat: 1, lng: 1 }]);
    expect(surrogate.status, surrogate.text).toBe(422);
    expect(surrogate.body.errors[0].field).toBe('poses.0.device_id');
  });

  it('refuses a NUL in a query parameter of any route, with a JSON 422 naming it', async () => {
    const response = await admin.get('/api/v1/users?codes=%00');
    expect(response.status, response.text).toBe(422);
    expect(response.body).toMatchObject({ status: 422, code: 'validation_failed' });
    expect(response.body.errors[0].field).toBe('query.codes');
  });

  it('refuses a NUL or a lone surrogate in any string of a JSON body (names, nested fields, keys)', async () => {
    const group = await admin.post('/api/v1/groups', { name: 'night\u0000shift' });
    expect(group.status, group.text).toBe(422);
    expect(group.body.errors[0].field).toBe('name');
    const poi = await admin.post('/api/v1/groups', { name: 'lone \udc00 low' });
    expect(poi.status, poi.text).toBe(422);
    expect(poi.body.errors[0].field).toBe('name');
    const building = await admin.post('/api/v1/buildings', {
      name: 'ok',
      location: { lat: 1, lng: 1 },
      custom_fields: [{ key: 'k', value: 'v\u0000' }],
    });
    expect(building.status, building.text).toBe(422);
    expect(building.body.errors[0].field).toBe('custom_fields.0.value');
    // The gateway still answers, and a clean name still works.
    expect((await admin.post('/api/v1/groups', { name: 'night shift' })).status).toBe(201);
  });

  it('lets a plain user upload only for unassigned devices or their own, whatever user_id says (403 naming the pose)', async () => {
    const someone = await createUser(admin, 'user');
    const colleague = await createUser(admin, 'user');
    expect((await admin.post('/api/v1/devices', { identifier: 'colleague-phone', user_id: colleague.user.id })).status).toBe(201);
    expect((await admin.post('/api/v1/devices', { identifier: 'someone-own', user_id: someone.user.id })).status).toBe(201);
    const forged = await upload(someone.client, [
      { device_id: 'someone-own', timestamp: Date.now(), lat: 1, lng: 1, user_id: someone.user.id },
      { device_id: 'colleague-phone', timestamp: Date.now(), lat: 1, lng: 1, user_id: someone.user.id },
    ]);
    expect(forged.status, forged.text).toBe(403);
    expect(forged.body.message).toContain('poses.1');
    expect(await storedCount('colleague-phone')).toBe(0);
    const withoutUser = await upload(someone.client, [{ device_id: 'colleague-phone', timestamp: Date.now(), lat: 1, lng: 1 }]);
    expect(withoutUser.status).toBe(403);
    const own = await upload(someone.client, [
      { device_id: 'someone-own', timestamp: Date.now(), lat: 1, lng: 1, user_id: someone.user.id },
      { device_id: 'someone-unassigned', timestamp: Date.now(), lat: 1, lng: 1 },
    ]);
    expect(own.status, own.text).toBe(204);
    // An admin still uploads for anyone's device.
    expect((await upload(admin, [{ device_id: 'colleague-phone', timestamp: Date.now(), lat: 1, lng: 1 }])).status).toBe(204);
  });

  it("serialises two concurrent PUTs of a building's paths: both succeed, one of them wins whole", async () => {
    // The race is on the first graph of a building (both insert): a few fresh buildings make it show.
    for (let round = 0; round < 3; round++) {
      const fresh = await createVenue(admin, `Paths venue ${round}`);
      const floorId = fresh.floors[0].id;
      const graph = (x: number) => ({
        nodes: [
          { id: 1, floor_id: floorId, x, y: 0 },
          { id: 2, floor_id: floorId, x: x + 1, y: 0 },
        ],
        links: [{ source: 1, target: 2 }],
      });
      const path = `/api/v1/buildings/${fresh.building.id}/paths`;
      const responses = await Promise.all([admin.put(path, graph(10)), admin.put(path, graph(20))]);
      expect(
        responses.map((r) => r.status),
        responses.map((r) => r.text).join('\n'),
      ).toEqual([200, 200]);
      const stored = await admin.get(path);
      expect(stored.body.nodes).toHaveLength(2);
      expect([10, 20]).toContain(stored.body.nodes[0].x);
      expect(stored.body.nodes[1].x).toBe(stored.body.nodes[0].x + 1);
    }
  });
});
