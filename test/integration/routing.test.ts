import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser, login } from '../../testkit/identity.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * The createVenue building (ground floor level 0, first floor level 1 at 4.5 m). Ground: a corridor along
 * y=10 from x=0 to x=60, stairs at x=0 and a lift at x=60 up to a corridor on the first floor.
 *
 *   first:   4 ---------------------- 5
 *            | stairs (not accessible) | lift
 *   ground:  1 ---------- 2 --------- 3        (2 at x=30)
 */
function venueGraph(ground: number, first: number) {
  return {
    nodes: [
      { id: 1, floor_id: ground, x: 0, y: 10 },
      { id: 2, floor_id: ground, x: 30, y: 10 },
      { id: 3, floor_id: ground, x: 60, y: 10 },
      { id: 4, floor_id: first, x: 0, y: 10 },
      { id: 5, floor_id: first, x: 60, y: 10 },
    ],
    links: [
      { source: 1, target: 2, origin: 'both', accessible: true },
      { source: 2, target: 3, origin: 'both', accessible: true },
      { source: 4, target: 5, origin: 'both', accessible: true },
      { source: 1, target: 4, origin: 'both', accessible: false, tags: ['stairs'] },
      { source: 3, target: 5, origin: 'both', accessible: true, tags: ['elevator'] },
    ],
  };
}

describe('routing on the path graph', () => {
  let running: RunningGateway;
  let admin: TestClient;
  let buildingId: number;
  let ground: number;
  let first: number;
  const routeUrl = (query: string) => `/api/v1/buildings/${buildingId}/route?${query}`;

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    const venue = await createVenue(admin, 'Routing venue');
    buildingId = venue.building.id;
    ground = venue.floors[0].id;
    first = venue.floors[1].id;
    const put = await admin.put(`/api/v1/buildings/${buildingId}/paths`, venueGraph(ground, first));
    expect(put.status, put.text).toBe(200);
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('takes the stairs by default and the lift when asked for an accessible route, floor by floor', async () => {
    const query = `from_floor_id=${ground}&from_x=5&from_y=12&to_floor_id=${first}&to_x=5&to_y=10`;
    const shortest = await admin.get(routeUrl(query));
    expect(shortest.status, shortest.text).toBe(200);
    // 5 m back to the stairs, 4.5 m up, 5 m along; the start was 2 m off the corridor.
    expect(shortest.body.distance_m).toBeCloseTo(14.5, 1);
    expect(shortest.body.from).toMatchObject({ floor_id: ground, x: 5, y: 10, snap_distance_m: 2 });
    expect(shortest.body.legs.map((leg: { floor_id: number }) => leg.floor_id)).toEqual([ground, first]);
    expect(shortest.body.steps.find((step: { floor_change?: unknown }) => step.floor_change).floor_change).toEqual({
      from_floor_id: ground,
      to_floor_id: first,
      direction: 'up',
      via: 'stairs',
    });
    const point = shortest.body.legs[0].points[0];
    expect(point.lat).toBeCloseTo(40.4168, 2);
    expect(point.lng).toBeCloseTo(-3.7038, 2);

    const accessible = await admin.get(routeUrl(`${query}&accessible=true`));
    expect(accessible.status, accessible.text).toBe(200);
    expect(accessible.body.distance_m).toBeCloseTo(55 + 4.5 + 55, 1);
    expect(accessible.body.steps.find((step: { floor_change?: unknown }) => step.floor_change).floor_change.via).toBe('lift');
    expect(accessible.body.duration_s).toBeGreaterThan(shortest.body.duration_s);
  });

  it('answers 422 naming the end that cannot be reached, and validates the query', async () => {
    // Avoiding a geofence around the lift leaves no accessible way up.
    const fence = await admin.post('/api/v1/geofences', {
      name: 'Lift lobby',
      building_id: buildingId,
      floor_id: ground,
      type: 'POLYGON',
      cartesians: squareCartesians(55, 5, 10),
    });
    expect(fence.status, fence.text).toBe(201);
    const blocked = await admin.get(
      routeUrl(
        `from_floor_id=${ground}&from_x=5&from_y=10&to_floor_id=${first}&to_x=5&to_y=10&accessible=true&avoid_geofence_ids=${fence.body.id}`,
      ),
    );
    expect(blocked.status, blocked.text).toBe(422);
    expect(blocked.body.errors).toEqual([expect.objectContaining({ field: 'to' })]);
    // The same avoidance with stairs allowed still finds a way.
    const around = await admin.get(
      routeUrl(`from_floor_id=${ground}&from_x=5&from_y=10&to_floor_id=${first}&to_x=5&to_y=10&avoid_geofence_ids=${fence.body.id}`),
    );
    expect(around.status, around.text).toBe(200);

    const missing = await admin.get(routeUrl(`from_floor_id=${ground}&from_x=5&from_y=10`));
    expect(missing.status).toBe(422);
    expect(missing.body).toMatchObject({ status: 422, code: 'validation_failed' });
    expect(missing.body.errors.map((error: { field: string }) => error.field)).toContain('query.to');
    const half = await admin.get(routeUrl(`from_floor_id=${ground}&from_x=5&to_floor_id=${first}&to_x=5&to_y=10`));
    expect(half.status).toBe(422);
    const otherFloor = await admin.get(routeUrl(`from_floor_id=999999&from_x=5&from_y=10&to_floor_id=${first}&to_x=5&to_y=10`));
    expect(otherFloor.status).toBe(422);
    expect(otherFloor.body.errors[0].field).toBe('from');
    expect(
      (await admin.get(`/api/v1/buildings/999999/route?from_floor_id=${ground}&from_x=5&from_y=10&to_floor_id=${first}&to_x=5&to_y=10`))
        .status,
    ).toBe(404);
  });

  it("routes from a device's live position to a POI, and ranks devices by route distance rather than straight line", async () => {
    const poi = await admin.post('/api/v1/pois', {
      name: 'First-aid kit',
      building_id: buildingId,
      position: { floor_id: first, cartesians: { x: 50, y: 10 } },
    });
    expect(poi.status, poi.text).toBe(201);
    const now = Date.now();
    const upload = await admin.post('/api/v1/realtime/positions', {
      poses: [
        // Straight below the target, but the stairs are 58 m away and the lift 8 m: 8 + 4.5 + 8 = 20.5 m by route.
        { device_id: 'below', timestamp: now, building_id: buildingId, floor_id: ground, x: 58, y: 10 },
        // On the same floor, 30 m along the corridor.
        { device_id: 'along', timestamp: now, building_id: buildingId, floor_id: first, x: 20, y: 10 },
        // On the same floor, 45 m along.
        { device_id: 'far', timestamp: now, building_id: buildingId, floor_id: first, x: 5, y: 10 },
      ],
    });
    expect(upload.status, upload.text).toBe(204);

    const fromDevice = await admin.get(routeUrl(`from_device_id=below&to_poi_id=${poi.body.id}`));
    expect(fromDevice.status, fromDevice.text).toBe(200);
    expect(fromDevice.body.distance_m).toBeCloseTo(2 + 4.5 + 10, 1);

    const nearest = await admin.get(`/api/v1/buildings/${buildingId}/nearest_devices?floor_id=${first}&x=50&y=10&limit=2`);
    expect(nearest.status, nearest.text).toBe(200);
    expect(nearest.body.data.map((device: { device_id: string }) => device.device_id)).toEqual(['below', 'along']);
    expect(nearest.body.data[0].route_distance_m).toBeCloseTo(16.5, 1);
    expect(nearest.body.data[1].route_distance_m).toBeCloseTo(30, 1);
    expect(nearest.body.data[0].straight_distance_m).toBeLessThan(nearest.body.data[1].straight_distance_m);

    // Responders: only devices whose user is in the chosen group.
    const group = await admin.post('/api/v1/groups', { name: 'Responders' });
    expect(group.status, group.text).toBe(201);
    const responder = await createUser(admin, 'user', { groups: group.body.id });
    expect(
      (
        await admin.post('/api/v1/realtime/positions', {
          poses: [
            {
              device_id: 'responder-phone',
              user_id: responder.user.id,
              timestamp: Date.now(),
              building_id: buildingId,
              floor_id: first,
              x: 5,
              y: 10,
            },
          ],
        })
      ).status,
    ).toBe(204);
    const responders = await admin.get(
      `/api/v1/buildings/${buildingId}/nearest_devices?floor_id=${first}&x=50&y=10&group_id=${group.body.id}`,
    );
    expect(responders.status, responders.text).toBe(200);
    expect(responders.body.data.map((device: { device_id: string }) => device.device_id)).toEqual(['responder-phone']);

    // A plain user sees only their own devices, and cannot route from a colleague's.
    const user = await createUser(admin, 'user');
    const plain = running.client.withToken((await login(running.client, user.email, user.password)).access_token);
    const theirs = await plain.get(`/api/v1/buildings/${buildingId}/nearest_devices?floor_id=${first}&x=50&y=10`);
    expect(theirs.status, theirs.text).toBe(200);
    expect(theirs.body.data).toEqual([]);
    expect((await plain.get(routeUrl(`from_device_id=below&to_poi_id=${poi.body.id}`))).status).toBe(422);
  });

  it('rebuilds the graph when the paths change', async () => {
    const query = `from_floor_id=${ground}&from_x=0&from_y=10&to_floor_id=${ground}&to_x=60&to_y=10`;
    expect((await admin.get(routeUrl(query))).body.distance_m).toBeCloseTo(60, 1);
    const graph = venueGraph(ground, first);
    // The corridor's middle node moves 20 m north: the ground floor way (2 x 36.1 m) is now longer than going
    // up the stairs, along the first floor and down the lift (4.5 + 60 + 4.5 m).
    graph.nodes[1] = { id: 2, floor_id: ground, x: 30, y: 30 };
    expect((await admin.put(`/api/v1/buildings/${buildingId}/paths`, graph)).status).toBe(200);
    await expect.poll(async () => (await admin.get(routeUrl(query))).body.distance_m).toBeCloseTo(69, 1);
  });
});
