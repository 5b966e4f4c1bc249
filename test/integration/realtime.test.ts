import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBuildingTransform } from '../../shared/geo/building-transform.js';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createApiKey, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const upload = (client: TestClient, poses: object[]) => client.post('/api/v1/realtime/positions', { poses });

describe(`positions: upload and live views (${driverLabel})`, () => {
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

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Realtime venue');
  });
  afterAll(async () => running?.stop());

  it('stores an indoor fix with lat/lng derived through the building transform, and shows it live with its accuracy', async () => {
    const now = Date.now();
    const response = await upload(admin, [
      {
        device_id: 'tag-1',
        timestamp: new Date(now).toISOString().replace('Z', '+00:00'),
        building_id: venue.building.id,
        floor_id: venue.floors[1].id,
        x: 12.5,
        y: 30,
        yaw: 1.5,
        accuracy: 2.5,
      },
    ]);
    expect(response.status, response.text).toBe(204);
    const [row] = await running.gateway.services.storage.execute<{ lat: number; lng: number; x: number; ts: Date }>(
      'select lat, lng, x, ts from positions where device_id = ?',
      ['tag-1'],
    );
    const expected = createBuildingTransform({
      location: venue.building.location,
      dimensions: venue.building.dimensions,
      rotation: venue.building.rotation,
    }).toGeo({ x: 12.5, y: 30 });
    expect(row!.lat).toBeCloseTo(expected.lat, 9);
    expect(row!.lng).toBeCloseTo(expected.lng, 9);
    expect(new Date(row!.ts).getTime()).toBe(now);

    const live = await admin.get(`/api/v1/real_time/building/${venue.building.id}`);
    expect(live.status).toBe(200);
    expect(live.body.type).toBe('FeatureCollection');
    const feature = live.body.features.find((f: { id: string }) => f.id === 'tag-1');
    expect(feature).toMatchObject({
      type: 'Feature',
      id: 'tag-1',
      geometry: { type: 'Point' },
      properties: {
        floor_id: venue.floors[1].id,
        level_height: 4.5,
        yaw: 1.5,
        accuracy: 2.5,
        local_coordinates: [12.5, 30],
        indoor: true,
        time: new Date(now).toISOString(),
      },
    });
    // [latitude, longitude], as the official client reads them.
    expect(feature.geometry.coordinates[0]).toBeCloseTo(expected.lat, 9);
    expect(feature.geometry.coordinates[1]).toBeCloseTo(expected.lng, 9);
  });

  it('gives an outdoor fix the building whose outline contains it, and none outside', async () => {
    const response = await upload(admin, [
      { device_id: 'walker-in', timestamp: Date.now(), lat: venue.building.location.lat, lng: venue.building.location.lng },
      { device_id: 'walker-out', timestamp: Date.now(), lat: 41.5, lng: 2.1 },
    ]);
    expect(response.status, response.text).toBe(204);
    const rows = await running.gateway.services.storage.execute<{ device_id: string; building_id: number | null; indoor: boolean }>(
      "select device_id, building_id, indoor from positions where device_id like 'walker-%' order by device_id",
    );
    expect(rows).toEqual([
      { device_id: 'walker-in', building_id: venue.building.id, indoor: false },
      { device_id: 'walker-out', building_id: null, indoor: false },
    ]);
  });

  it('rejects a batch with any invalid pose, listing each by index, and stores nothing of it', async () => {
    const good = {
      device_id: 'batch-good',
      timestamp: Date.now(),
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x: 1,
      y: 1,
    };
    const response = await upload(admin, [
      good,
      {
        device_id: 'batch-bad-1',
        timestamp: '2026-01-01T10:00:00',
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        x: 1,
        y: 1,
      },
      { device_id: 'batch-bad-2', timestamp: Date.now(), building_id: venue.building.id, floor_id: 999999, x: 1, y: 1 },
      { device_id: 'batch-bad-3', timestamp: Date.now(), lat: 95, lng: 1 },
      { timestamp: Date.now(), lat: 1, lng: 1 },
      { device_id: 'batch-bad-5', timestamp: Date.now(), building_id: venue.building.id, x: 1 },
    ]);
    expect(response.status).toBe(422);
    expect(response.body.code).toBe('validation_failed');
    const fields = response.body.errors.map((e: { field: string }) => e.field);
    expect(fields).toEqual(
      expect.arrayContaining(['poses.1.timestamp', 'poses.2.floor_id', 'poses.3.lat', 'poses.4.device_id', 'poses.5.floor_id']),
    );
    expect(fields.some((field: string) => field.startsWith('poses.0.'))).toBe(false);
    expect(await storedCount('batch-good')).toBe(0);
    expect((await upload(admin, [])).status).toBe(422);
    expect((await admin.post('/api/v1/realtime/positions', { nothing: true })).status).toBe(422);
  });

  it('accepts epoch milliseconds and ISO 8601 with any offset; refuses a fix far in the future', async () => {
    // Within POSITIONS_MAX_AGE_SECONDS (7 days) of now, as every accepted fix must be.
    const at = Math.floor(Date.now() / 1000) * 1000 - 3600_000;
    const inMadrid = new Date(at + 2 * 3600_000).toISOString().replace('Z', '+02:00');
    const response = await upload(admin, [
      { device_id: 'clock-a', timestamp: at, lat: 1, lng: 1 },
      { device_id: 'clock-b', timestamp: inMadrid, lat: 1, lng: 1 },
    ]);
    expect(response.status, response.text).toBe(204);
    const rows = await running.gateway.services.storage.execute<{ ts: Date }>(
      "select ts from positions where device_id in ('clock-a', 'clock-b')",
    );
    expect(rows.map((row) => new Date(row.ts).getTime())).toEqual([at, at]);
    const future = await upload(admin, [{ device_id: 'clock-c', timestamp: Date.now() + 3600_000, lat: 1, lng: 1 }]);
    expect(future.status).toBe(422);
    expect(future.body.errors[0].field).toBe('poses.0.timestamp');
  });

  it('registers a device unknown to the organization on its first upload', async () => {
    await upload(admin, [{ device_id: 'brand-new-phone', timestamp: Date.now(), lat: 1, lng: 1 }]);
    const devices = await admin.get('/api/v1/devices?identifiers=brand-new-phone');
    expect(devices.body.data).toHaveLength(1);
    expect(devices.body.data[0]).toMatchObject({ identifier: 'brand-new-phone', user_id: null });
  });

  it('takes the owner of an assigned device as the user of its positions', async () => {
    const owner = await createUser(admin, 'user');
    await admin.post('/api/v1/devices', { identifier: 'owned-phone', user_id: owner.user.id });
    await upload(admin, [{ device_id: 'owned-phone', timestamp: Date.now(), lat: 1, lng: 1 }]);
    const [row] = await running.gateway.services.storage.execute<{ user_id: string }>(
      "select user_id from positions where device_id = 'owned-phone'",
    );
    expect(row!.user_id).toBe(owner.user.id);
  });

  it('positioning keys upload; read-only keys and other users’ positions are refused', async () => {
    const positioning = await createApiKey(admin, 'positioning');
    expect(
      (
        await running.client.post(
          '/api/v1/realtime/positions',
          { poses: [{ device_id: 'kiosk', timestamp: Date.now(), lat: 1, lng: 1 }] },
          { 'x-api-key': positioning },
        )
      ).status,
    ).toBe(204);
    const readOnly = await createApiKey(admin, 'read-only');
    expect(
      (
        await running.client.post(
          '/api/v1/realtime/positions',
          { poses: [{ device_id: 'kiosk', timestamp: Date.now(), lat: 1, lng: 1 }] },
          { 'x-api-key': readOnly },
        )
      ).status,
    ).toBe(403);
    const someone = await createUser(admin, 'user');
    const other = await createUser(admin, 'user');
    const own = await upload(someone.client, [{ device_id: 'someone-phone', timestamp: Date.now(), lat: 1, lng: 1 }]);
    expect(own.status).toBe(204);
    const [row] = await running.gateway.services.storage.execute<{ user_id: string }>(
      "select user_id from positions where device_id = 'someone-phone'",
    );
    expect(row!.user_id).toBe(someone.user.id);
    const forged = await upload(someone.client, [
      { device_id: 'someone-phone', timestamp: Date.now(), lat: 1, lng: 1, user_id: other.user.id },
    ]);
    expect(forged.status).toBe(422);
    expect(forged.body.errors[0].field).toBe('poses.0.user_id');
  });

  it('filters live positions as the official client asks (comma lists, indoor, max_sec_threshold) with devices_info', async () => {
    const owner = await createUser(admin, 'user');
    await admin.post('/api/v1/devices', { identifier: 'filter-a', user_id: owner.user.id });
    await upload(admin, [
      { device_id: 'filter-a', timestamp: Date.now(), building_id: venue.building.id, floor_id: venue.floors[0].id, x: 5, y: 5 },
      { device_id: 'filter-b', timestamp: Date.now(), building_id: venue.building.id, floor_id: venue.floors[0].id, x: 6, y: 6 },
    ]);
    const both = await admin.get(`/api/v1/realtime/positions?building_ids=${venue.building.id}%2C999&device_ids=filter-a%2Cfilter-b`);
    expect(both.status).toBe(200);
    expect(both.body.features.map((f: { id: string }) => f.id)).toEqual(['filter-a', 'filter-b']);
    expect(both.body.devices_info.map((d: { id: string }) => d.id).sort()).toEqual(['filter-a', 'filter-b']);
    const info = both.body.devices_info.find((d: { id: string }) => d.id === 'filter-a');
    expect(info).toMatchObject({ code: 'filter-a', user_id: owner.user.id, building_ids: [venue.building.id] });
    const byUser = await admin.get(`/api/v1/realtime/positions?user_ids=${owner.user.id}`);
    expect(byUser.body.features.map((f: { id: string }) => f.id)).toEqual(['filter-a']);
    const outdoorOnly = await admin.get('/api/v1/realtime/positions?indoor=false&device_ids=filter-a');
    expect(outdoorOnly.body.features).toEqual([]);
    expect((await admin.get('/api/v1/realtime/positions?device_ids=')).status).toBe(422);
  });

  it('shares one commit between concurrent uploads and loses none of them', async () => {
    const uploads = Array.from({ length: 25 }, (_, i) =>
      upload(
        admin,
        Array.from({ length: 20 }, (_, j) => ({
          device_id: `burst-${i}`,
          timestamp: Date.now() - j * 1000,
          building_id: venue.building.id,
          floor_id: venue.floors[0].id,
          x: j,
          y: i,
        })),
      ),
    );
    const responses = await Promise.all(uploads);
    expect(responses.map((r) => r.status)).toEqual(responses.map(() => 204));
    const [row] = await running.gateway.services.storage.execute<{ n: number }>(
      "select count(*)::int as n from positions where device_id like 'burst-%'",
    );
    expect(row!.n).toBe(500);
  });

  it('only shows another organization nothing of this one', async () => {
    const live = await admin.get(`/api/v1/real_time/building/999999`);
    expect(live.status).toBe(404);
  });
});
