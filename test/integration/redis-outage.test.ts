import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BuildingRegistry } from '../../gateway/realtime/building-registry.js';
import { DeviceDirectory } from '../../gateway/realtime/device-directory.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient } from '../../testkit/identity.js';
import { FaultRedis } from '../../testkit/fault-servers.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const organizationOf = async (running: RunningGateway, buildingId: number) =>
  (
    await running.gateway.services.storage.execute<{ organization_id: string }>('select organization_id from buildings where id = ?', [
      buildingId,
    ])
  )[0]!.organization_id;

/**
 * Caches kept fresh by bus messages (cartography in the building registry, device owners in the device
 * directory) must not stay stale when a message is lost: a change made while Redis is down (here written
 * straight to the database, as another gateway would have, its announcement lost) shows once Redis is back.
 */
describe(`Redis outage: caches and reports (${driverLabel.split(' + ')[0]} + private redis)`, () => {
  let redis: FaultRedis;
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  let organizationId: string;

  beforeAll(async () => {
    redis = await FaultRedis.start();
    // A TTL far beyond the test: only the resync signal can refresh the caches in time.
    running = await startTestGateway({ REDIS_URL: redis.url, CACHE_TTL_SECONDS: '3600' });
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Cache venue');
    organizationId = await organizationOf(running, venue.building.id);
  });
  afterAll(async () => {
    await running?.stop();
    await redis?.stop();
  });

  it('reloads a geofence and a device owner changed while Redis was down', async () => {
    const { registry, devices, storage } = running.gateway.services;
    const fence = await admin.post('/api/v1/geofences', {
      building_id: String(venue.building.id),
      floor_id: venue.floors[0].id,
      name: 'Before',
      type: 'POLYGON',
      cartesians: squareCartesians(10, 10, 5),
    });
    expect(fence.status, fence.text).toBe(201);
    const names = async () => (await registry.get(organizationId, venue.building.id))?.geofences.map((g) => g.name);
    await expect.poll(names).toEqual(['Before']);
    const [owner] = await storage.execute<{ id: string }>('select id from users limit 1');
    expect((await devices.resolve(organizationId, ['tag-cache']))[0]?.userId).toBeNull();

    await redis.stop();
    await storage.execute('update geofences set name = ? where id = ?', ['After', fence.body.id]);
    await storage.execute('update devices set user_id = ? where organization_id = ? and identifier = ?', [
      owner!.id,
      organizationId,
      'tag-cache',
    ]);
    expect(await names()).toEqual(['Before']); // nobody told this gateway
    await redis.resume();

    await expect.poll(names, { timeout: 15_000 }).toEqual(['After']);
    await expect.poll(async () => (await devices.resolve(organizationId, ['tag-cache']))[0]?.userId, { timeout: 15_000 }).toBe(owner!.id);
  });

  it('answers a report 503 with Retry-After while Redis is down, instead of hanging, and serves it again after', async () => {
    const query = `/api/v1/reports/visitors.json?from_date=2026-01-01T00:00:00Z&to_date=2026-01-02T00:00:00Z&building_id=${venue.building.id}`;
    // Redis came back in the previous test: the job queue's connections may still be on their way back.
    await expect.poll(async () => (await admin.get(query)).status, { timeout: 15_000, interval: 200 }).toBe(200);
    await redis.stop();
    try {
      const down = await admin.get(query);
      expect(down.status, down.text).toBe(503);
      expect(down.body.code).toBe('unavailable');
      expect(down.headers.get('retry-after')).toMatch(/^\d+$/);
    } finally {
      await redis.resume();
    }
    await expect.poll(async () => (await admin.get(query)).status, { timeout: 15_000, interval: 200 }).toBe(200);
  });
});

describe(`bounded caches (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  let organizationId: string;

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Bounded venue');
    organizationId = await organizationOf(running, venue.building.id);
  });
  afterAll(async () => running?.stop());

  it('remembers a bounded number of building ids that do not exist, and still finds the ones that do', async () => {
    const { storage, bus } = running.gateway.services;
    const registry = new BuildingRegistry(storage, bus, undefined, { maxAbsent: 5 });
    for (let id = 900_000; id < 900_020; id++) expect(await registry.get(organizationId, id)).toBeUndefined();
    expect(registry.stats().absent.size).toBe(5);
    expect((await registry.get(organizationId, venue.building.id))?.id).toBe(venue.building.id);
    expect(registry.stats().loaded.size).toBe(1);
  });

  it('remembers a bounded number of devices, and resolves every identifier asked for', async () => {
    const { storage, bus } = running.gateway.services;
    const directory = new DeviceDirectory(storage, bus, { maxDevices: 10 });
    const identifiers = Array.from({ length: 50 }, (_, i) => `bounded-${i}`);
    const resolved = await directory.resolve(organizationId, identifiers);
    expect(resolved.map((device) => device?.identifier)).toEqual(identifiers);
    expect(directory.stats().size).toBe(10);
  });

  it('re-reads a building older than the TTL in the background, serving the old copy meanwhile', async () => {
    const { storage, bus } = running.gateway.services;
    let now = 1_000_000;
    const registry = new BuildingRegistry(storage, bus, undefined, { ttlMs: 60_000, now: () => now });
    const fence = await admin.post('/api/v1/geofences', {
      building_id: String(venue.building.id),
      floor_id: venue.floors[0].id,
      name: 'Old',
      type: 'POLYGON',
      cartesians: squareCartesians(30, 30, 5),
    });
    expect(fence.status, fence.text).toBe(201);
    const names = () => registry.peek(venue.building.id)?.geofences.map((g) => g.name);
    await registry.get(organizationId, venue.building.id);
    expect(names()).toContain('Old');
    await storage.execute('update geofences set name = ? where id = ?', ['New', fence.body.id]);
    now += 30_000;
    expect(names()).toContain('Old');
    now += 30_000;
    expect(names()).toContain('Old'); // still served while the new copy loads
    await expect.poll(names).toContain('New');
  });
});
