import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CartographyChange } from '../../gateway/bus-channels.js';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createApiKey, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const keys = (value: object) => Object.keys(value).sort();
/**
 * Straight-line metres between two WGS84 points through earth-centred coordinates: an independent check of the
 * server's georeferencing (a spherical haversine is off by decimetres over 100 m, too coarse for 1 cm).
 */
function metresBetween(a: { lat: number; lng: number }, b: { lat: number; lng: number }): number {
  const ecef = ({ lat, lng }: { lat: number; lng: number }) => {
    const semiMajor = 6378137;
    const e2 = (1 / 298.257223563) * (2 - 1 / 298.257223563);
    const [phi, lambda] = [(lat * Math.PI) / 180, (lng * Math.PI) / 180];
    const n = semiMajor / Math.sqrt(1 - e2 * Math.sin(phi) ** 2);
    return [n * Math.cos(phi) * Math.cos(lambda), n * Math.cos(phi) * Math.sin(lambda), n * (1 - e2) * Math.sin(phi)];
  };
  const [p, q] = [ecef(a), ecef(b)];
  return Math.hypot(p[0]! - q[0]!, p[1]! - q[1]!, p[2]! - q[2]!);
}

const BUILDING_KEYS = [
  'calibration_model',
  'corners',
  'created_at',
  'custom_fields',
  'description',
  'dimensions',
  'id',
  'info',
  'location',
  'name',
  'picture_thumb_url',
  'picture_url',
  'rotation',
  'server_url',
  'updated_at',
  'user_uuid',
].sort();
const FLOOR_KEYS = [
  'building_id',
  'created_at',
  'custom_fields',
  'id',
  'level',
  'level_height',
  'maps',
  'name',
  'project_id',
  'updated_at',
].sort();
const POSITION_KEYS = ['cartesians', 'floor_id', 'georeferences', 'lat', 'lng', 'radius', 'x', 'y'].sort();

describe(`cartography (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let venue: Awaited<ReturnType<typeof createVenue>>;
  const announced: CartographyChange[] = [];

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
    await running.gateway.services.bus.subscribe('cartography:changed', (change) => announced.push(change));
    venue = await createVenue(admin);
  });
  afterAll(async () => running?.stop());

  describe('response contracts (spec 2.1 to 2.8)', () => {
    it('building (basic): exact fields and types, corners derived', async () => {
      const list = await admin.get('/api/v1/buildings');
      expect(list.status).toBe(200);
      const building = list.body.find((b: { id: number }) => b.id === venue.building.id);
      expect(keys(building)).toEqual(BUILDING_KEYS);
      expect(building).toMatchObject({
        name: 'Venue',
        description: 'Calle Mayor 1',
        location: { lat: 40.4168, lng: -3.7038 },
        dimensions: { width: 120, length: 80 },
        rotation: 0.7,
        custom_fields: [{ key: 'wing', value: 'north' }],
        calibration_model: null,
        picture_url: null,
      });
      expect(typeof building.id).toBe('number');
      expect(typeof building.user_uuid).toBe('string');
      expect(building.corners).toHaveLength(4);
      const [topLeft, topRight, bottomRight] = building.corners;
      expect(Math.abs(metresBetween(topLeft, topRight) - 120)).toBeLessThan(0.01);
      expect(Math.abs(metresBetween(topRight, bottomRight) - 80)).toBeLessThan(0.01);
    });

    it('building detail: floors (without map_id), indoor and outdoor POIs, events, paths, geofences', async () => {
      const [ground] = venue.floors;
      await admin.post('/api/v1/pois', {
        building_id: venue.building.id,
        name: 'Desk',
        position: { floor_id: ground.id, cartesians: { x: 10, y: 5 } },
      });
      await admin.post('/api/v1/pois', { building_id: venue.building.id, name: 'Parking', location: { lat: 40.417, lng: -3.7 } });
      await admin.post('/api/v1/events', {
        building_id: venue.building.id,
        name: 'Welcome',
        info: '<b>hi</b>',
        position: { floor_id: ground.id, radius: 3, cartesians: { x: 1, y: 1 } },
      });
      await admin.post('/api/v1/geofences', {
        building_id: String(venue.building.id),
        floor_id: ground.id,
        name: 'Lab',
        type: 'POLYGON',
        cartesians: squareCartesians(20, 20, 10),
      });
      const detail = await admin.get(`/api/v1/buildings/${venue.building.id}`);
      expect(detail.status).toBe(200);
      expect(keys(detail.body)).toEqual([...BUILDING_KEYS, 'events', 'floors', 'geofences', 'indoor_pois', 'outdoor_pois', 'paths'].sort());
      expect(detail.body.floors.map((f: { level: number }) => f.level)).toEqual([0, 1]);
      for (const floor of detail.body.floors) {
        expect(keys(floor)).toEqual(FLOOR_KEYS);
        expect(keys(floor.maps)).toEqual(['map_url', 'scale']);
        expect(floor.project_id).toBe(venue.building.id);
      }
      expect(detail.body.indoor_pois.map((p: { name: string }) => p.name)).toContain('Desk');
      expect(detail.body.outdoor_pois.map((p: { name: string }) => p.name)).toContain('Parking');
      expect(detail.body.events.map((e: { name: string }) => e.name)).toContain('Welcome');
      expect(detail.body.geofences.map((g: { name: string }) => g.name)).toContain('Lab');
      expect(detail.body.paths).toEqual({ nodes: [], links: [] });
      const compact = await admin.get(`/api/v1/buildings/${venue.building.id}?view=compact`);
      expect(compact.body).not.toHaveProperty('floors');
      expect(compact.body).not.toHaveProperty('info');
    });

    it('floor: map_id present in floor responses, project_id mirrors building_id', async () => {
      const floor = await admin.get(`/api/v1/floors/${venue.floors[1].id}`);
      expect(keys(floor.body)).toEqual(FLOOR_KEYS);
      expect(keys(floor.body.maps)).toEqual(['map_id', 'map_url', 'scale']);
      expect(floor.body).toMatchObject({ level: 1, level_height: 4.5, building_id: venue.building.id, project_id: venue.building.id });
      const byBuilding = await admin.get(`/api/v1/buildings/${venue.building.id}/floors`);
      expect(byBuilding.body.map((f: { id: number }) => f.id)).toEqual([venue.floors[0].id, venue.floors[1].id]);
    });

    it('indoor POI carries spec position (georeferences, cartesians) plus flat lat/lng/x/y; outdoor POI has floor_id null and location', async () => {
      const indoor = await admin.post('/api/v1/pois', {
        building_id: venue.building.id,
        name: 'Reception',
        info: '<p>desk</p>',
        category_id: 1,
        position: { floor_id: venue.floors[0].id, radius: 2, cartesians: { x: 30, y: 40 } },
        custom_fields: [{ key: 'k', value: 'v' }],
      });
      expect(indoor.status, indoor.text).toBe(201);
      expect(keys(indoor.body)).toEqual([
        'building_id',
        'category_id',
        'created_at',
        'custom_fields',
        'id',
        'info',
        'name',
        'position',
        'updated_at',
      ]);
      expect(keys(indoor.body.position)).toEqual(POSITION_KEYS);
      expect(indoor.body.position).toMatchObject({ floor_id: venue.floors[0].id, radius: 2, cartesians: { x: 30, y: 40 }, x: 30, y: 40 });
      expect(indoor.body.position.lat).toBe(indoor.body.position.georeferences.lat);
      const outdoor = await admin.post('/api/v1/pois', {
        building_id: venue.building.id,
        name: 'Gate',
        location: { lat: 40.41, lng: -3.71 },
      });
      expect(keys(outdoor.body)).toEqual([
        'building_id',
        'category_id',
        'created_at',
        'custom_fields',
        'floor_id',
        'id',
        'info',
        'location',
        'name',
        'updated_at',
      ]);
      expect(outdoor.body).toMatchObject({ floor_id: null, location: { lat: 40.41, lng: -3.71 } });
      const exterior = await admin.get(`/api/v1/buildings/${venue.building.id}/exterior_pois`);
      expect(exterior.body.map((p: { name: string }) => p.name)).toContain('Gate');
      const byType = await admin.get(`/api/v1/buildings/${venue.building.id}/pois?type=outdoor`);
      expect(byType.body.every((p: { floor_id: null }) => p.floor_id === null)).toBe(true);
      const indoorList = await admin.get(`/api/v1/buildings/${venue.building.id}/pois`);
      expect(indoorList.body.every((p: { position?: object }) => p.position !== undefined)).toBe(true);
    });

    it('POI categories: platform defaults public with string icon urls; an organization adds its own', async () => {
      const list = await admin.get('/api/v1/poi_categories');
      expect(list.body.length).toBeGreaterThanOrEqual(10);
      for (const category of list.body) {
        expect(keys(category)).toEqual([
          'code',
          'created_at',
          'icon_url',
          'id',
          'name_en',
          'name_es',
          'public',
          'selected_icon_url',
          'updated_at',
        ]);
        expect(typeof category.icon_url).toBe('string');
      }
      const created = await admin.post('/api/v1/poi_categories', { name_en: 'Lab', name_es: 'Laboratorio', code: 'lab' });
      expect(created.status).toBe(201);
      expect(created.body.public).toBe(false);
      expect((await admin.get(`/api/v1/poi_categories/${created.body.id}`)).body.code).toBe('lab');
      expect((await admin.put(`/api/v1/poi_categories/${created.body.id}`, { name_en: 'Labs' })).body.name_en).toBe('Labs');
      expect((await admin.put('/api/v1/poi_categories/1', { name_en: 'Mine now' })).status).toBe(403);
      expect((await admin.delete('/api/v1/poi_categories/1')).status).toBe(403);
      expect((await admin.delete(`/api/v1/poi_categories/${created.body.id}`)).status).toBe(204);
    });

    it('event: project_id, sanitised info beside info_unsafe, trigger and conversion areas', async () => {
      const html = '<p onclick="steal()">Hello <script>alert(1)</script><a href="javascript:x()">x</a></p>';
      const event = await admin.post('/api/v1/events', {
        building_id: venue.building.id,
        name: 'Promo',
        info: html,
        url: 'https://example.test',
        position: { floor_id: venue.floors[0].id, radius: 5, georeferences: { lat: 40.4168, lng: -3.7038 } },
        conversion_area: { floor_id: venue.floors[0].id, radius: 2, cartesians: { x: 60, y: 40 } },
      });
      expect(event.status, event.text).toBe(201);
      expect(keys(event.body)).toEqual([
        'building_id',
        'conversion_area',
        'created_at',
        'custom_fields',
        'id',
        'info',
        'info_unsafe',
        'name',
        'position',
        'project_id',
        'updated_at',
        'url',
      ]);
      expect(event.body.info_unsafe).toBe(html);
      expect(event.body.info).not.toMatch(/script|onclick|javascript/);
      expect(event.body.info).toContain('Hello');
      expect(event.body.project_id).toBe(venue.building.id);
      // The building centre is the middle of the floorplan.
      expect(event.body.position.cartesians.x).toBeCloseTo(60, 2);
      expect(event.body.position.cartesians.y).toBeCloseTo(40, 2);
      expect(keys(event.body.conversion_area)).toEqual(POSITION_KEYS);
      const list = await admin.get(`/api/v1/buildings/${venue.building.id}/events`);
      expect(list.body.map((e: { id: number }) => e.id)).toContain(event.body.id);
    });

    it('geofence: spec fields (level_id, floor_id, building_id as string, geometric as [lat, lng] closed ring)', async () => {
      const created = await admin.post('/api/v1/geofences', {
        name: 'Ward',
        code: 'W1',
        building_id: String(venue.building.id),
        floor_id: venue.floors[0].id,
        type: 'POLYGON',
        cartesians: squareCartesians(5, 5, 10),
        max_stay_time: 600,
        organization_id: (await admin.get('/api/v1/organizations/current_organization')).body.id,
      });
      expect(created.status, created.text).toBe(201);
      const geofence = (await admin.get(`/api/v1/geofences/${created.body.id}`)).body;
      expect(keys(geofence)).toEqual([
        'building_id',
        'cartesians',
        'code',
        'created_at',
        'custom_fields',
        'deleted',
        'description',
        'exit_grace_s',
        'floor_id',
        'geometric',
        'id',
        'info',
        'level_id',
        'max_stay_time',
        'min_dwell_s',
        'muster_point',
        'name',
        'organization_id',
        'radius',
        'type',
        'updated_at',
      ]);
      expect(geofence).toMatchObject({
        building_id: String(venue.building.id),
        floor_id: venue.floors[0].id,
        level_id: venue.floors[0].id,
        type: 'POLYGON',
        deleted: false,
        max_stay_time: 600,
        muster_point: false,
      });
      expect(geofence.geometric).toHaveLength(5);
      expect(geofence.geometric[0]).toEqual(geofence.geometric[4]);
      expect(geofence.geometric[0][0]).toBeGreaterThan(40); // latitude first
      // The spec's trailing slash form is the same route.
      expect((await admin.get(`/api/v1/areas/${created.body.id}/`)).body.id).toBe(created.body.id);
    });
  });

  describe('georeferencing', () => {
    it('round-trips a point through the rotated building under 1 cm, either way in', async () => {
      const floor = venue.floors[0].id;
      const fromCartesians = await admin.post('/api/v1/pois', {
        building_id: venue.building.id,
        name: 'A',
        position: { floor_id: floor, cartesians: { x: 97.25, y: 12.5 } },
      });
      const geo = fromCartesians.body.position.georeferences;
      const fromGeo = await admin.post('/api/v1/pois', {
        building_id: venue.building.id,
        name: 'B',
        position: { floor_id: floor, georeferences: geo },
      });
      const back = fromGeo.body.position.cartesians;
      expect(Math.hypot(back.x - 97.25, back.y - 12.5)).toBeLessThan(0.01);
      // And the distance between two placed points matches their cartesian distance.
      const origin = await admin.post('/api/v1/pois', {
        building_id: venue.building.id,
        name: 'O',
        position: { floor_id: floor, cartesians: { x: 0, y: 0 } },
      });
      expect(Math.abs(metresBetween(origin.body.position.georeferences, geo) - Math.hypot(97.25, 12.5))).toBeLessThan(0.01);
    });

    it('the bottom-left corner of the floorplan is the building’s bottom-left corner', async () => {
      const origin = await admin.post('/api/v1/pois', {
        building_id: venue.building.id,
        name: 'corner',
        position: { floor_id: venue.floors[0].id, cartesians: { x: 0, y: 0 } },
      });
      const corners = (await admin.get(`/api/v1/buildings/${venue.building.id}`)).body.corners;
      expect(metresBetween(origin.body.position.georeferences, corners[3])).toBeLessThan(0.01);
    });

    it('moving the building re-derives corners', async () => {
      const building = await admin.post('/api/v1/buildings', {
        name: 'Mover',
        location: { lat: 10, lng: 10 },
        dimensions: { width: 50, length: 20 },
      });
      const moved = await admin.patch(`/api/v1/buildings/${building.body.id}`, { location: { lat: 11, lng: 10 } });
      expect(moved.body.corners[0].lat).toBeGreaterThan(10.9);
      const fromCorners = await admin.post('/api/v1/buildings', { name: 'By corners', corners: moved.body.corners });
      expect(fromCorners.status, fromCorners.text).toBe(201);
      expect(fromCorners.body.dimensions.width).toBeCloseTo(50, 2);
      expect(fromCorners.body.dimensions.length).toBeCloseTo(20, 2);
    });
  });

  describe('validation', () => {
    it('names the field: latitude out of range', async () => {
      const response = await admin.post('/api/v1/buildings', {
        name: 'Bad',
        location: { lat: 91, lng: 0 },
        dimensions: { width: 1, length: 1 },
      });
      expect(response.status).toBe(422);
      expect(response.body.errors.map((e: { field: string }) => e.field)).toEqual(['location.lat']);
    });

    it('names the field: corners that make no building, or that come with a rotation but no location', async () => {
      const point = { lat: 40.4168, lng: -3.7038 };
      const degenerate = await admin.post('/api/v1/buildings', { name: 'Dot', corners: [point, point, point, point] });
      expect(degenerate.status, degenerate.text).toBe(422);
      expect(degenerate.body.errors[0].field).toBe('corners');
      const continental = await admin.post('/api/v1/buildings', {
        name: 'Huge',
        corners: [
          { lat: 80, lng: -180 },
          { lat: 80, lng: 180 },
          { lat: -80, lng: 180 },
          { lat: -80, lng: -180 },
        ],
      });
      expect(continental.status, continental.text).toBe(422);
      const rotated = await admin.post('/api/v1/buildings', { name: 'Rotated', rotation: 0, corners: [point, point, point, point] });
      expect(rotated.status, rotated.text).toBe(422);
      expect(rotated.body.errors[0].field).toBe('location');
    });

    it('names the field: a building side under 1 cm (a floorplan scaled to it would be infinite)', async () => {
      const tiny = await admin.patch(`/api/v1/buildings/${venue.building.id}`, { dimensions: { width: 5e-324, length: 80 } });
      expect(tiny.status, tiny.text).toBe(422);
      expect(tiny.body.errors[0].field).toBe('dimensions.width');
    });

    it('names the field: a building at the pole, which no transform can georeference (it was stored, then every read of it failed)', async () => {
      const polar = await admin.post('/api/v1/buildings', {
        name: 'Pole',
        location: { lat: -89.99999999999999, lng: 0 },
        dimensions: { width: 10, length: 10 },
      });
      expect(polar.status, polar.text).toBe(422);
      expect(polar.body.errors[0].field).toBe('location.lat');
      const byCorners = await admin.post('/api/v1/buildings', {
        name: 'Pole',
        corners: [
          { lat: 89.95, lng: 0 },
          { lat: 89.95, lng: 0.01 },
          { lat: 89.949, lng: 0.01 },
          { lat: 89.949, lng: 0 },
        ],
      });
      expect(byCorners.status, byCorners.text).toBe(422);
      expect(byCorners.body.errors[0].field).toBe('corners');
    });

    it('names the field: unclosed and self-intersecting polygon rings', async () => {
      const base = { name: 'G', building_id: venue.building.id, floor_id: venue.floors[0].id, type: 'POLYGON' };
      const unclosed = await admin.post('/api/v1/geofences', {
        ...base,
        cartesians: [
          [0, 0],
          [10, 0],
          [10, 10],
          [0, 10],
        ],
      });
      expect(unclosed.status).toBe(422);
      expect(unclosed.body.errors[0].field).toBe('cartesians');
      const bowTie = await admin.post('/api/v1/geofences', {
        ...base,
        cartesians: [
          [0, 0],
          [10, 10],
          [10, 0],
          [0, 20],
          [0, 0],
        ],
      });
      expect(bowTie.status).toBe(422);
      expect(
        bowTie.body.errors.some((e: { field: string; message: string }) => e.field === 'cartesians' && /intersect/i.test(e.message)),
      ).toBe(true);
      const badLat = await admin.post('/api/v1/geofences', {
        ...base,
        geometric: [
          [95, 0],
          [40, 1],
          [40, 2],
          [95, 0],
        ],
      });
      expect(badLat.status).toBe(422);
      expect(badLat.body.errors[0].field).toBe('geometric.0.0');
    });

    it('names the field: a floor of another building', async () => {
      const other = await createVenue(admin, 'Other');
      const response = await admin.post('/api/v1/pois', {
        building_id: venue.building.id,
        name: 'X',
        position: { floor_id: other.floors[0].id, cartesians: { x: 1, y: 1 } },
      });
      expect(response.status).toBe(422);
      expect(response.body.errors[0].field).toBe('position.floor_id');
    });

    it('names the field: an unknown category', async () => {
      const response = await admin.post('/api/v1/pois', {
        building_id: venue.building.id,
        name: 'X',
        category_id: 999999,
        position: { floor_id: venue.floors[0].id, cartesians: { x: 1, y: 1 } },
      });
      expect(response.status).toBe(422);
      expect(response.body.errors[0].field).toBe('category_id');
    });

    it('names the field: a path link to a node that does not exist, and a node on a foreign floor', async () => {
      const floor = venue.floors[0].id;
      const response = await admin.put(`/api/v1/buildings/${venue.building.id}/paths`, {
        nodes: [
          { id: 1, floor_id: floor, x: 0, y: 0 },
          { id: 2, floor_id: 999999, x: 1, y: 1 },
        ],
        links: [{ source: 1, target: 3, origin: 'both', accessible: true }],
      });
      expect(response.status).toBe(422);
      expect(response.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['links.0.target', 'nodes.1.floor_id']);
    });

    it('a circle needs a radius; a floor level is unique in its building', async () => {
      const circle = await admin.post('/api/v1/geofences', {
        name: 'C',
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'CIRCLE',
        cartesians: [[5, 5]],
      });
      expect(circle.status).toBe(422);
      expect(circle.body.errors[0].field).toBe('radius');
      expect((await admin.post('/api/v1/floors', { building_id: venue.building.id, level: 0 })).status).toBe(409);
    });
  });

  describe('writes', () => {
    it('paths: PUT replaces the graph (accessible and the spec’s accesible spelling), GET returns it', async () => {
      const floor = venue.floors[0].id;
      const graph = {
        nodes: [
          { id: 1, floor_id: floor, x: 0, y: 0 },
          { id: 2, floor_id: floor, x: 5, y: 0 },
          { id: 3, floor_id: floor, x: 5, y: 5 },
        ],
        links: [
          { source: 1, target: 2, origin: 'both', accessible: false, tags: ['stairs'] },
          { source: 2, target: 3, origin: 'source', accesible: true },
        ],
      };
      expect((await admin.put(`/api/v1/buildings/${venue.building.id}/paths`, graph)).status).toBe(200);
      const paths = await admin.get(`/api/v1/buildings/${venue.building.id}/paths`);
      expect(paths.body.links).toEqual([
        { source: 1, target: 2, origin: 'both', accessible: false, tags: ['stairs'] },
        { source: 2, target: 3, origin: 'source', accessible: true, tags: [] },
      ]);
      expect((await admin.put(`/api/v1/buildings/${venue.building.id}/paths`, { nodes: [], links: [] })).status).toBe(200);
      expect((await admin.get(`/api/v1/projects/${venue.building.id}/paths`)).body).toEqual({ nodes: [], links: [] });
    });

    it('POIs: PUT and PATCH change only what is sent; bulk creates all or none', async () => {
      const poi = await admin.post('/api/v1/pois', {
        building_id: venue.building.id,
        name: 'Bed 1',
        info: 'i',
        position: { floor_id: venue.floors[0].id, cartesians: { x: 1, y: 2 } },
      });
      const renamed = await admin.put(`/api/v1/pois/${poi.body.id}`, { name: 'Bed 2' });
      expect(renamed.body).toMatchObject({ name: 'Bed 2', info: 'i', position: { x: 1, y: 2 } });
      const moved = await admin.patch(`/api/v1/pois/${poi.body.id}`, {
        position: { floor_id: venue.floors[1].id, cartesians: { x: 3, y: 4 } },
      });
      expect(moved.body.position).toMatchObject({ floor_id: venue.floors[1].id, x: 3, y: 4 });
      const before = (await admin.get('/api/v1/pois')).body.length;
      const partlyBad = await admin.post('/api/v1/pois_bulk', [
        { building_id: venue.building.id, name: 'ok', position: { floor_id: venue.floors[0].id, cartesians: { x: 1, y: 1 } } },
        { building_id: venue.building.id, position: { floor_id: venue.floors[0].id, cartesians: { x: 1, y: 1 } } },
        { building_id: venue.building.id, name: 'bad floor', position: { floor_id: 999999, cartesians: { x: 1, y: 1 } } },
      ]);
      expect(partlyBad.status).toBe(422);
      expect(partlyBad.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['1.name', '2.position.floor_id']);
      expect((await admin.get('/api/v1/pois')).body.length).toBe(before);
      const good = await admin.post('/api/v1/pois_bulk', [
        {
          building_id: venue.building.id,
          name: 'b1',
          position: { floor_id: venue.floors[0].id, georeferences: { lat: 40.4168, lng: -3.7038 } },
        },
        { building_id: venue.building.id, name: 'b2', location: { lat: 40.42, lng: -3.7 } },
      ]);
      expect(good.status).toBe(201);
      expect(good.body.map((p: { name: string }) => p.name)).toEqual(['b1', 'b2']);
      expect((await admin.delete(`/api/v1/pois/${poi.body.id}`)).status).toBe(204);
      expect((await admin.get(`/api/v1/pois/${poi.body.id}`)).status).toBe(404);
    });

    it('geofences: update re-derives geometry; delete is soft and found again with deleted=true', async () => {
      const created = await admin.post('/api/v1/geofences', {
        name: 'Soft',
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'CIRCLE',
        cartesians: [[10, 10]],
        radius: 4,
      });
      expect(created.status, created.text).toBe(201);
      const updated = await admin.put(`/api/v1/geofences/${created.body.id}`, { cartesians: [[20, 20]] });
      expect(updated.body.cartesians).toEqual([[20, 20]]);
      expect(updated.body.radius).toBe(4);
      expect(updated.body.geometric[0][0]).not.toBe(created.body.geometric[0][0]);
      expect((await admin.delete(`/api/v1/geofences/${created.body.id}`)).status).toBe(204);
      const live = await admin.get(`/api/v1/areas/search?building_id=${venue.building.id}`);
      expect(live.body.data.map((g: { id: string }) => g.id)).not.toContain(created.body.id);
      const deleted = await admin.get(`/api/v1/areas/search/?building_id=${venue.building.id}&deleted=true`);
      expect(deleted.body.data.map((g: { id: string }) => g.id)).toContain(created.body.id);
      expect((await admin.get(`/api/v1/geofences/${created.body.id}`)).body.deleted).toBe(true);
    });

    it('areas and geofences search: a filter is required, pagination is 0-based, building_ids[] and name filter', async () => {
      expect((await admin.get('/api/v1/areas/search')).status).toBe(422);
      for (let i = 0; i < 3; i++) {
        await admin.post('/api/v1/geofences', {
          name: `Zone ${i}`,
          building_id: venue.building.id,
          floor_id: venue.floors[1].id,
          type: 'POINT',
          cartesians: [[i, i]],
        });
      }
      const page = await admin.get(
        `/api/v1/geofences/search?building_ids%5B%5D=${venue.building.id}&building_ids%5B%5D=999&name=zone&page=1&size=2&sort=name,asc`,
      );
      expect(page.status).toBe(200);
      expect(page.body.metadata).toEqual({
        first: false,
        last: true,
        total_pages: 2,
        total_elements: 3,
        number_of_elements: 1,
        size: 2,
        number: 1,
      });
      expect(page.body.data.map((g: { name: string }) => g.name)).toEqual(['Zone 2']);
      const unsortable = await admin.get(`/api/v1/geofences/search?building_id=${venue.building.id}&sort=constructor`);
      expect(unsortable.status).toBe(422);
      expect(unsortable.body.errors).toEqual([{ field: 'query.sort', message: 'sortable fields: name, code, created_at, updated_at, id' }]);
      const organization = (await admin.get('/api/v1/organizations/current_organization')).body.id;
      const byOrganization = await admin.get(`/api/v1/geofences/search?organization_id=${organization}&size=1000`);
      expect(byOrganization.body.metadata.total_elements).toBeGreaterThanOrEqual(3);
      const foreign = await admin.get('/api/v1/areas/search?organization_id=00000000-0000-4000-8000-000000000000');
      expect(foreign.body.data).toEqual([]);
    });

    it('infrastructure: wifi access points and BLE beacons of a building', async () => {
      const wifi = await admin.post('/api/v1/infrastructure', {
        building_id: venue.building.id,
        type: 'wifi',
        bssid: '00:11:22:AA:BB:CC',
        ssid: 'staff',
        tx_power: 20,
        position: { floor_id: venue.floors[0].id, cartesians: { x: 1, y: 2 } },
      });
      expect(wifi.status, wifi.text).toBe(201);
      expect(wifi.body).toMatchObject({ type: 'wifi', bssid: '00:11:22:aa:bb:cc', cartesians: { x: 1, y: 2 } });
      const beacon = await admin.post('/api/v1/infrastructure', {
        building_id: venue.building.id,
        type: 'ble',
        uuid: 'f7826da6-4fa2-4e98-8024-bc5b71e0893e',
        major: 1,
        minor: 7,
        tx_power: -59,
        position: { floor_id: venue.floors[0].id, cartesians: { x: 3, y: 4 } },
      });
      expect(beacon.status, beacon.text).toBe(201);
      const noBssid = await admin.post('/api/v1/infrastructure', {
        building_id: venue.building.id,
        type: 'wifi',
        position: { floor_id: venue.floors[0].id, cartesians: { x: 1, y: 2 } },
      });
      expect(noBssid.status).toBe(422);
      const list = await admin.get(`/api/v1/infrastructure?building_id=${venue.building.id}`);
      expect(list.body.wifi.map((i: { id: number }) => i.id)).toEqual([wifi.body.id]);
      expect(list.body.ble.map((i: { id: number }) => i.id)).toEqual([beacon.body.id]);
      expect((await admin.put(`/api/v1/infrastructure/${beacon.body.id}`, { minor: 8 })).body.minor).toBe(8);
      expect((await admin.delete(`/api/v1/infrastructure/${wifi.body.id}`)).status).toBe(204);
    });

    it('deleting a building removes its floors and contents', async () => {
      const doomed = await createVenue(admin, 'Doomed');
      expect((await admin.delete(`/api/v1/buildings/${doomed.building.id}`)).status).toBe(204);
      expect((await admin.get(`/api/v1/floors/${doomed.floors[0].id}`)).status).toBe(404);
      expect((await admin.get(`/api/v1/projects/${doomed.building.id}`)).status).toBe(404);
    });
  });

  describe('aliases, roles and the bus', () => {
    it('serves the deprecated projects paths', async () => {
      const projects = await admin.get('/api/v1/projects');
      expect(projects.body.map((b: { id: number }) => b.id)).toContain(venue.building.id);
      expect((await admin.get(`/api/v1/projects/${venue.building.id}`)).body.floors).toHaveLength(2);
      expect((await admin.get(`/api/v1/projects/${venue.building.id}/floors`)).body).toHaveLength(2);
      expect((await admin.get(`/api/v1/projects/${venue.building.id}/points_of_interest`)).status).toBe(200);
      expect((await admin.get(`/api/v1/projects/${venue.building.id}/exterior_pois`)).status).toBe(200);
      expect((await admin.get(`/api/v1/projects/${venue.building.id}/events`)).status).toBe(200);
    });

    it('users read cartography but only admins write it; read-only keys read', async () => {
      const { client } = await createUser(admin, 'user');
      expect((await client.get(`/api/v1/buildings/${venue.building.id}`)).status).toBe(200);
      expect(
        (await client.post('/api/v1/buildings', { name: 'x', location: { lat: 1, lng: 1 }, dimensions: { width: 1, length: 1 } })).status,
      ).toBe(403);
      const key = await createApiKey(admin, 'read-only');
      expect((await running.client.get('/api/v1/buildings', { 'x-api-key': key })).status).toBe(200);
    });

    it('announces geofence, event, floor and building changes on the bus', async () => {
      announced.length = 0;
      const geofence = await admin.post('/api/v1/geofences', {
        name: 'Bus',
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        type: 'POINT',
        cartesians: [[1, 1]],
      });
      await admin.delete(`/api/v1/geofences/${geofence.body.id}`);
      await admin.patch(`/api/v1/floors/${venue.floors[1].id}`, { name: 'Renamed' });
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(announced.map((c) => `${c.kind}:${c.change}:${c.buildingId}`)).toEqual([
        `geofence:created:${venue.building.id}`,
        `geofence:deleted:${venue.building.id}`,
        `floor:updated:${venue.building.id}`,
      ]);
    });
  });
});
