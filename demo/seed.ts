import { randomBytes } from 'node:crypto';
import { DemoApiError, type DemoApi } from './api-client.js';
import { demoFloorplanPng } from './floorplan-png.js';
import { demoPersonName } from './people.js';
import { DEMO_POI_CATEGORIES, DEMO_POI_CATEGORY_OF, poiIconPng } from './poi-icons.js';
import {
  DEMO_ASSEMBLY_POINTS,
  DEMO_BUILDING_NAME,
  DEMO_EVENT,
  DEMO_FLOORS,
  DEMO_GEOFENCES,
  DEMO_LENGTH_M,
  DEMO_LOCATION,
  DEMO_POIS,
  DEMO_WIDTH_M,
  demoGraph,
} from './venue.js';

export interface SeedOptions {
  /** Name of the building: a second seeding finds it by this name and reuses it. */
  buildingName?: string;
  /** `max_stay_time` of the max-stay geofences, seconds. */
  maxStaySeconds?: number;
  /** `deadman_silence_s` of the building: a device silent for longer raises DEADMAN. */
  deadmanSilenceSeconds?: number;
  /** How many responders (users of the group "Responders", each with a device). */
  responders?: number;
  /** How many named people in all, responders included, each with a device (the simulator's devices). */
  people?: number;
  /** Prefix of the simulated devices' identifiers (`demo-01`...). */
  devicePrefix?: string;
}

export interface SeededVenue {
  buildingId: number;
  floorIds: number[];
  groupId: string;
  /** A fresh key of the simulator's user (read-write, user_manager): reads the venue, uploads for every device. */
  simulatorApiKey: string;
  /** False when an existing, complete venue was reused. */
  created: boolean;
}

const SEED_MARK = 'floorcast_demo';
const SIMULATOR_EMAIL = 'simulator@demo.floorcast.local';
const SIMULATOR_KEY_DESCRIPTION = 'Floorcast demo simulator';

export const deviceIdentifier = (prefix: string, index: number) => `${prefix}-${String(index + 1).padStart(2, '0')}`;

/**
 * Seeds the demo venue through the public API, as an operator would, signed in as an admin. Idempotent: a
 * building of that name marked complete is reused as it is; one left half-made by an interrupted seeding is
 * deleted and made again. The group, users and devices are found before they are created.
 */
export async function seedDemoVenue(api: DemoApi, options: SeedOptions = {}): Promise<SeededVenue> {
  const name = options.buildingName ?? DEMO_BUILDING_NAME;
  const maxStay = options.maxStaySeconds ?? 45;
  const prefix = options.devicePrefix ?? 'demo';

  const existing = (await api.get<any[]>('/api/v1/buildings')).filter((b) => b.name === name);
  let building = existing.find(isComplete);
  for (const stale of existing.filter((b) => !isComplete(b))) await api.delete(`/api/v1/buildings/${stale.id}`);
  const created = !building;
  let floorIds: number[];
  if (building) {
    floorIds = (await api.get<any[]>(`/api/v1/buildings/${building.id}/floors`)).sort((a, b) => a.level - b.level).map((f) => f.id);
  } else {
    ({ building, floorIds } = await createBuilding(api, name, maxStay));
  }
  // On every start, so a venue seeded before assembly points existed gets them too.
  await ensureAssemblyPoints(api, building.id, floorIds[0]!);
  // Applied on every start, so a changed option (or a hand edit) is put back.
  await api.put(`/api/v1/buildings/${building.id}/alarm_settings`, {
    deadman_silence_s: options.deadmanSilenceSeconds ?? 30,
    deadman_after_s: null,
    deadman_radius_m: null,
  });

  const groupId = await ensureGroup(api, 'Responders', 'First responders, ranked by walking distance to an alarm');
  const users = await api.get<{ data: any[] }>('/api/v1/users?size=1000');
  const ensureUser = async (email: string, body: Record<string, unknown>) =>
    users.data.find((u) => u.email === email) ??
    (await api.post('/api/v1/users', { email, password: randomBytes(18).toString('base64url'), ...body }));
  const responders = options.responders ?? 5;
  const people = Math.max(options.people ?? 50, responders);
  for (let i = 0; i < people; i++) {
    // Named as the console shows them, "Ana (nurse)": a device id alone says nothing to an operator.
    const fullName = demoPersonName(i, responders);
    const email = i < responders ? `responder${i + 1}@demo.floorcast.local` : `person${i + 1}@demo.floorcast.local`;
    const user = await ensureUser(email, { role: 'user', full_name: fullName, ...(i < responders ? { group_ids: [groupId] } : {}) });
    if (user.full_name !== fullName) await api.patch(`/api/v1/users/${user.id}`, { full_name: fullName }); // a venue seeded before names
    await ensureDevice(api, deviceIdentifier(prefix, i), `${fullName.split(' (')[0]}'s ${i < responders ? 'phone' : 'tag'}`, user.id);
  }
  const simulator = await ensureUser(SIMULATOR_EMAIL, { role: 'user_manager', full_name: 'Demo simulator' });
  // Keys are shown only once: replace the previous run's key rather than pile them up.
  for (const key of await api.get<any[]>(`/api/v1/auth/apikeys?user_id=${simulator.id}`)) {
    if (key.description === SIMULATOR_KEY_DESCRIPTION) await api.delete(`/api/v1/auth/apikeys/${key.id}`);
  }
  const key = await api.post('/api/v1/auth/apikeys', {
    permission: 'read-write',
    description: SIMULATOR_KEY_DESCRIPTION,
    user_id: simulator.id,
  });
  return { buildingId: building.id, floorIds, groupId, simulatorApiKey: key.apikey, created };
}

const isComplete = (building: any) =>
  (building.custom_fields ?? []).some((field: any) => field.key === SEED_MARK && field.value === 'complete');

async function createBuilding(api: DemoApi, name: string, maxStay: number) {
  const building = await api.post('/api/v1/buildings', {
    name,
    description: 'Sample venue of `npm run demo`: two floors, a lift and stairs, simulated staff walking the corridors',
    location: DEMO_LOCATION,
    dimensions: { width: DEMO_WIDTH_M, length: DEMO_LENGTH_M },
    rotation: 0,
    custom_fields: [{ key: SEED_MARK, value: 'seeding' }],
  });
  const form = new FormData();
  form.append('image', new Blob([new Uint8Array(demoFloorplanPng(10))], { type: 'image/png' }), 'demo-floorplan.png');
  const image = await api.request('POST', '/api/v1/images', undefined, { form });
  const floorIds: number[] = [];
  for (const floor of DEMO_FLOORS) {
    const created = await api.post('/api/v1/floors', {
      building_id: building.id,
      level: floor.level,
      level_height: floor.levelHeight,
      name: floor.name,
      map_id: image.id,
      scale: 10,
    });
    floorIds.push(created.id);
  }
  for (const fence of DEMO_GEOFENCES) {
    await api.post('/api/v1/geofences', {
      name: fence.name,
      building_id: building.id,
      floor_id: floorIds[fence.floor],
      type: 'POLYGON',
      cartesians: fence.cartesians,
      max_stay_time: fence.maxStay ? maxStay : null,
    });
  }
  await api.post('/api/v1/events', {
    building_id: building.id,
    name: DEMO_EVENT.name,
    info: DEMO_EVENT.info,
    position: { floor_id: floorIds[DEMO_EVENT.floor], cartesians: { x: DEMO_EVENT.x, y: DEMO_EVENT.y }, radius: DEMO_EVENT.radius },
  });
  const categories = await ensurePoiCategories(api);
  await api.post(
    '/api/v1/pois_bulk',
    DEMO_POIS.map((poi) => ({
      building_id: building.id,
      name: poi.name,
      info: '',
      category_id: categories.get(DEMO_POI_CATEGORY_OF[poi.name] ?? '') ?? null,
      position: { floor_id: floorIds[poi.floor], cartesians: { x: poi.x, y: poi.y } },
    })),
  );
  await api.put(`/api/v1/buildings/${building.id}/paths`, demoGraph(floorIds));
  // Marked last: a building without the mark is a seeding that did not finish.
  const complete = await api.patch(`/api/v1/buildings/${building.id}`, { custom_fields: [{ key: SEED_MARK, value: 'complete' }] });
  return { building: complete, floorIds };
}

/** The POI categories with their icons (the console draws them), found by code before they are created. Code -> id. */
async function ensurePoiCategories(api: DemoApi): Promise<Map<string, number>> {
  const found = await api.get<any>('/api/v1/poi_categories');
  const list: any[] = Array.isArray(found) ? found : (found.data ?? []);
  const ids = new Map<string, number>();
  for (const category of DEMO_POI_CATEGORIES) {
    let existing = list.find((c) => c.code === category.code);
    if (!existing) {
      const form = new FormData();
      form.append('image', new Blob([new Uint8Array(poiIconPng(category))], { type: 'image/png' }), `${category.code}.png`);
      const icon = await api.request('POST', '/api/v1/images', undefined, { form });
      existing = await api.post('/api/v1/poi_categories', {
        code: category.code,
        name_en: category.name,
        icon: icon.id,
        selected_icon: icon.id,
      });
    }
    ids.set(category.code, existing.id);
  }
  return ids;
}

/** The venue's assembly points (evacuations gather people there), found by name before they are created. */
async function ensureAssemblyPoints(api: DemoApi, buildingId: number, groundFloorId: number): Promise<void> {
  const { geofences = [] } = await api.get<{ geofences?: { name: string; muster_point?: boolean }[] }>(`/api/v1/buildings/${buildingId}`);
  for (const point of DEMO_ASSEMBLY_POINTS) {
    if (geofences.some((fence) => fence.muster_point && fence.name === point.name)) continue;
    await api.post('/api/v1/geofences', {
      name: point.name,
      building_id: buildingId,
      floor_id: groundFloorId,
      type: point.type,
      cartesians: point.cartesians,
      ...(point.radius !== undefined ? { radius: point.radius } : {}),
      muster_point: true,
    });
  }
}

async function ensureGroup(api: DemoApi, name: string, description: string): Promise<string> {
  const found = await api.get<any>(`/api/v1/groups?name=${encodeURIComponent(name)}`);
  const list: any[] = Array.isArray(found) ? found : (found.data ?? []);
  const group = list.find((g) => g.name === name) ?? (await api.post('/api/v1/groups', { name, description }));
  return group.id;
}

async function ensureDevice(api: DemoApi, identifier: string, name: string, userId: string): Promise<void> {
  try {
    await api.post('/api/v1/devices', { identifier, name, user_id: userId });
  } catch (error) {
    if (!(error instanceof DemoApiError) || error.status !== 409) throw error;
    const found = await api.get<any>(`/api/v1/devices?identifiers=${encodeURIComponent(identifier)}`);
    const device = (Array.isArray(found) ? found : found.data)[0];
    await api.patch(`/api/v1/devices/${device.id}`, { user_id: userId });
  }
}
