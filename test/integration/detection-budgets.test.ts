import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createApiKey, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const PER_BUILDING = 3;
const VERTICES = 12; // a square ring is 5 vertices: two fit, a third does not
const NEW_PER_UPLOAD = 50;
const PER_ORGANIZATION = 80;

/**
 * Issue 28 item 6 (NM5, M3): what one tenant's detection may cost is bounded: geofences per building, vertices
 * per organization, devices per organization and new devices per upload, each a setting, 422 past it.
 */
describe(`detection budgets (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;

  beforeAll(async () => {
    running = await startTestGateway({
      GEOFENCES_MAX_PER_BUILDING: String(PER_BUILDING),
      GEOFENCE_VERTICES_MAX_PER_ORGANIZATION: String(VERTICES),
      DEVICES_MAX_NEW_PER_UPLOAD: String(NEW_PER_UPLOAD),
      DEVICES_MAX_PER_ORGANIZATION: String(PER_ORGANIZATION),
    });
    admin = await adminClient(running.client);
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('geofences per building: past the cap 422; a deleted one frees its place', async () => {
    const venue = await createVenue(admin, 'Capped building');
    const circle = (x: number) => ({
      name: `Circle ${x}`,
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      type: 'CIRCLE',
      cartesians: [[x, 5]],
      radius: 1,
    });
    const created = [];
    for (let index = 0; index < PER_BUILDING; index++) {
      const response = await admin.post('/api/v1/geofences', circle(index * 3 + 2));
      expect(response.status, response.text).toBe(201);
      created.push(response.body);
    }
    const refused = await admin.post('/api/v1/geofences', circle(30));
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({
      status: 422,
      errors: [{ field: 'building_id', message: expect.stringContaining('GEOFENCES_MAX_PER_BUILDING') }],
    });
    const search = await admin.get(`/api/v1/geofences/search?building_id=${venue.building.id}`);
    expect(search.body.data).toHaveLength(PER_BUILDING);
    expect((await admin.delete(`/api/v1/geofences/${created[0].id}`)).status).toBe(204);
    const again = await admin.post('/api/v1/geofences', circle(30));
    expect(again.status, again.text).toBe(201);
    // Editing a fence of a full building is not adding one.
    expect((await admin.patch(`/api/v1/geofences/${again.body.id}`, { name: 'Renamed' })).status).toBe(200);
    for (const fence of [...created.slice(1), again.body]) await admin.delete(`/api/v1/geofences/${fence.id}`);
  });

  it('vertices per organization: past the cap 422, whichever building; an update counts its own vertices once', async () => {
    const first = await createVenue(admin, 'Vertices one');
    const second = await createVenue(admin, 'Vertices two');
    const square = (venue: typeof first, x: number) => ({
      name: `Square ${x}`,
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      type: 'POLYGON',
      cartesians: squareCartesians(x, 10, 5),
    });
    const a = await admin.post('/api/v1/geofences', square(first, 10));
    expect(a.status, a.text).toBe(201);
    const b = await admin.post('/api/v1/geofences', square(second, 10));
    expect(b.status, b.text).toBe(201);
    const refused = await admin.post('/api/v1/geofences', square(second, 30));
    expect(refused.status).toBe(422);
    expect(refused.body.errors[0].message).toContain('GEOFENCE_VERTICES_MAX_PER_ORGANIZATION');
    // Reshaping a fence replaces its vertices: 10 in use stays 10.
    const moved = await admin.patch(`/api/v1/geofences/${a.body.id}`, { cartesians: squareCartesians(20, 20, 5) });
    expect(moved.status, moved.text).toBe(200);
    expect((await admin.get(`/api/v1/geofences/${a.body.id}`)).body.cartesians[0]).toEqual([20, 20]);
    for (const fence of [a.body, b.body]) await admin.delete(`/api/v1/geofences/${fence.id}`);
  });

  it('one upload cannot register 10,000 devices, nor more than the per-upload cap; the organization stops at its quota', async () => {
    const venue = await createVenue(admin, 'Devices venue');
    const user = await createUser(admin, 'user');
    const key = await createApiKey(user.client, 'positioning');
    const positioning = running.client.withHeaders({ 'x-api-key': key });
    const pose = (deviceId: string) => ({
      device_id: deviceId,
      timestamp: Date.now(),
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x: 3,
      y: 3,
    });
    const upload = (prefix: string, count: number) =>
      positioning.post('/api/v1/realtime/positions', { poses: Array.from({ length: count }, (_, i) => pose(`${prefix}-${i}`)) });
    const devices = async () =>
      Number((await running.gateway.services.storage.execute<{ n: string }>('select count(*) as n from devices'))[0]!.n);
    const before = await devices();

    const flood = await upload('flood', 10_000);
    expect(flood.status, flood.text).toBe(422);
    expect(flood.body.errors[0].message).toContain('DEVICES_MAX_NEW_PER_UPLOAD');
    expect(await devices()).toBe(before);
    expect((await upload('over', NEW_PER_UPLOAD + 1)).status).toBe(422);
    expect(await devices()).toBe(before);

    expect((await upload('first', NEW_PER_UPLOAD)).status).toBe(204);
    expect(await devices()).toBe(before + NEW_PER_UPLOAD);
    // Known devices never count as new: the same upload again, and more positions of them, go through.
    expect((await upload('first', NEW_PER_UPLOAD)).status).toBe(204);
    const room = PER_ORGANIZATION - (before + NEW_PER_UPLOAD);
    const quota = await upload('second', room + 1);
    expect(quota.status).toBe(422);
    expect(quota.body.errors[0].message).toContain('DEVICES_MAX_PER_ORGANIZATION');
    expect((await upload('second', room)).status).toBe(204);
    expect(await devices()).toBe(PER_ORGANIZATION);
  });
});
