import SitumSDK from '@situm/sdk-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_EMAIL, ADMIN_PASSWORD } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/** A 1x1 PNG, the smallest floorplan there is. */
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
    '1f15c4890000000d49444154789c626001000000ffff03000006000557bfabd40000000049454e44ae426082',
  'hex',
);

/**
 * Every cartography call of the official JavaScript client, unmodified, against a running gateway: reads and
 * writes, in the order an integrator would make them.
 */
describe(`official client @situm/sdk-js: cartography (${driverLabel})`, () => {
  let running: RunningGateway;
  let sdk: SitumSDK;
  beforeAll(async () => {
    running = await startTestGateway();
    sdk = new SitumSDK({ domain: running.baseUrl, auth: { username: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  });
  afterAll(async () => running?.stop());

  it('runs the whole cartography lifecycle', async () => {
    const building = await sdk.cartography.createBuilding({
      name: 'SDK tower',
      description: 'made by the official client',
      info: '<p>hello</p>',
      location: { lat: 43.3623, lng: -8.4115 },
      dimensions: { width: 60, length: 40 },
      rotation: 0.3,
      customFields: [{ key: 'k', value: 'v' }],
    } as never);
    expect(building.name).toBe('SDK tower');
    expect((await sdk.cartography.getBuildings()).map((b) => b.id)).toContain(building.id);
    expect((await sdk.cartography.getBuildings({ view: 'compact' })).map((b) => b.id)).toContain(building.id);
    const patched = await sdk.cartography.patchBuilding(building.id, { name: 'SDK tower 2' } as never);
    expect(patched.name).toBe('SDK tower 2');

    const image = await sdk.images.uploadImage(new Blob([PNG], { type: 'image/png' }), { filename: 'plan.png' } as never);
    expect(typeof image.id).toBe('string');
    const floor = await sdk.cartography.createFloor({
      buildingId: building.id,
      level: 0,
      levelHeight: 0,
      name: 'Ground',
      mapId: image.id,
    } as never);
    expect(floor.level).toBe(0);
    expect((floor.maps as unknown as { mapId: string }).mapId).toBe(image.id);
    expect((await sdk.cartography.getFloors({ buildingId: building.id })).map((f) => f.id)).toEqual([floor.id]);
    expect((await sdk.cartography.getFloors()).map((f) => f.id)).toContain(floor.id);
    expect((await sdk.cartography.getFloorById(floor.id)).id).toBe(floor.id);
    expect((await sdk.cartography.patchFloor(floor.id, { name: 'Lobby' } as never)).name).toBe('Lobby');

    const categories = await sdk.cartography.getPoiCategories();
    expect(categories.length).toBeGreaterThan(0);
    expect(categories[0]!.iconUrl.startsWith(running.baseUrl)).toBe(true);
    const category = await sdk.cartography.createPoiCategory({ nameEn: 'Vending', nameEs: 'Máquinas', code: 'vending' } as never);
    await sdk.cartography.patchPoiCategory(category.id, { nameEn: 'Vending machines' } as never);

    const poi = await sdk.cartography.createPoi({
      buildingId: building.id,
      name: 'Coffee',
      info: 'hot',
      categoryId: category.id,
      position: { floorId: floor.id, georeferences: { lat: 43.3623, lng: -8.4115 } },
    } as never);
    // The client reads flat position fields into `location`.
    expect(poi.location).toMatchObject({ lat: 43.3623, lng: -8.4115 });
    expect(Math.abs((poi.location as { x: number }).x - 30)).toBeLessThan(0.01);
    expect((await sdk.cartography.getPois({ buildingId: building.id })).map((p) => p.id)).toContain(poi.id);
    expect((await sdk.cartography.getPois()).map((p) => p.id)).toContain(poi.id);
    expect((await sdk.cartography.patchPoi(poi.id, { name: 'Espresso' } as never)).name).toBe('Espresso');
    const bulk = await sdk.cartography.createPoisBulk([
      { buildingId: building.id, name: 'Bulk 1', position: { floorId: floor.id, georeferences: { lat: 43.3622, lng: -8.4114 } } },
      { buildingId: building.id, name: 'Bulk 2', position: { floorId: floor.id, georeferences: { lat: 43.3621, lng: -8.4113 } } },
    ] as never);
    expect(bulk.map((p) => p.name)).toEqual(['Bulk 1', 'Bulk 2']);
    await sdk.cartography.patchPoisBulk(bulk.map((p) => ({ id: p.id, name: `${p.name}!` })) as never);
    await sdk.cartography.deletePoisBulk(bulk.map((p) => p.id));
    expect((await sdk.cartography.getPois({ buildingId: building.id })).map((p) => p.name)).toEqual(['Espresso']);

    const geofence = await sdk.cartography.createGeofence({
      name: 'Lobby zone',
      buildingId: String(building.id),
      floorId: floor.id,
      type: 'POLYGON',
      geometric: [
        [43.3622, -8.4116],
        [43.3622, -8.4114],
        [43.3624, -8.4114],
        [43.3624, -8.4116],
        [43.3622, -8.4116],
      ],
      code: 'L1',
    } as never);
    expect(geofence.floorId).toBe(floor.id);
    const page = await sdk.cartography.getGeofences({ buildingIds: [building.id], page: 0, size: 10 } as never);
    expect(page.data.map((g) => g.id)).toEqual([geofence.id]);
    expect((await sdk.cartography.getGeofenceById(geofence.id)).name).toBe('Lobby zone');
    expect((await sdk.cartography.patchGeofence(geofence.id, { name: 'Lobby' } as never)).name).toBe('Lobby');

    const graph = {
      nodes: [
        { id: 1, floorId: floor.id, x: 1, y: 1 },
        { id: 2, floorId: floor.id, x: 10, y: 1 },
      ],
      links: [{ source: 1, target: 2, origin: 'both', tags: [], accessible: true }],
    };
    await sdk.cartography.patchPath(building.id, graph as never);
    const paths = (await sdk.cartography.getPaths({ buildingId: building.id })) as unknown as { nodes: unknown[] };
    expect(paths.nodes).toHaveLength(2);
    expect(((await sdk.cartography.getPaths()) as unknown as { links: unknown[] }).links.length).toBeGreaterThanOrEqual(1);

    const detail = await sdk.cartography.getBuildingById(building.id);
    expect(detail.floors.map((f) => f.id)).toEqual([floor.id]);
    expect(detail.pois.map((p) => p.id)).toEqual([poi.id]);
    expect(detail.geofences.map((g) => g.id)).toEqual([geofence.id]);

    await sdk.cartography.deleteGeofence(geofence.id);
    await sdk.cartography.deletePoi(poi.id);
    await sdk.cartography.deletePoiCategory(category.id);
    await sdk.cartography.deleteFloor(floor.id);
    await sdk.cartography.deleteBuilding(building.id);
    await expect(sdk.cartography.getBuildingById(building.id)).rejects.toMatchObject({ status: 404, code: 'not_found' });
  });
});
