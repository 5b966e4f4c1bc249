import { randomUUID } from 'node:crypto';
import { createVenue, squareCartesians } from '../../../testkit/cartography.js';
import type { TestClient } from '../../../testkit/http-client.js';
import { adminClient, createApiKey, createUser, login, ADMIN_EMAIL, ADMIN_PASSWORD } from '../../../testkit/identity.js';
import { pngBytes, uploadImage } from '../../../testkit/images.js';
import type { SeededKind } from './schema-arbitrary.js';

/**
 * What the fuzzer points valid-looking ids at: one row of each kind, owned by the organization of the admin it
 * signs in as, so requests get past authentication and lookups and reach validation. The signed-in admin is
 * never one of the targets (a fuzzed PATCH could demote or lock out the fuzzer itself).
 */
export interface SeededWorld {
  admin: TestClient;
  adminToken: string;
  ids: Record<SeededKind, string>;
}

export async function seedWorld(client: TestClient): Promise<SeededWorld> {
  const tokens = await login(client, ADMIN_EMAIL, ADMIN_PASSWORD);
  const admin = await adminClient(client);
  const { building, floors } = await createVenue(admin, 'Fuzzed venue');
  const victim = await createUser(admin, 'user');
  const created = async (path: string, body: unknown): Promise<string> => {
    const response = await admin.post(path, body);
    if (response.status !== 201 && response.status !== 200) throw new Error(`seeding ${path}: ${response.status} ${response.text}`);
    return String(response.body.id);
  };
  const floor = floors[0].id;
  const category = await created('/api/v1/poi_categories', { name_en: 'Exits', code: 'exits' });
  const image = await uploadImage(admin, pngBytes(4, 4));
  const current = await admin.get('/api/v1/organizations/current_organization');
  const ids: Record<SeededKind, string> = {
    building: String(building.id),
    floor: String(floor),
    user: victim.user.id,
    group: await created('/api/v1/groups', { name: 'Night shift' }),
    device: await created('/api/v1/devices', { identifier: 'fuzz-device-1' }),
    poiCategory: category,
    poi: await created('/api/v1/pois', { building_id: building.id, name: 'Lift', position: { floor_id: floor, x: 5, y: 5 } }),
    event: await created('/api/v1/events', {
      building_id: building.id,
      name: 'Promo',
      position: { floor_id: floor, x: 10, y: 10, radius: 3 },
    }),
    geofence: await created('/api/v1/geofences', {
      name: 'Hall',
      building_id: building.id,
      floor_id: floor,
      type: 'POLYGON',
      cartesians: squareCartesians(1, 1, 10),
    }),
    infrastructure: await created('/api/v1/infrastructure', {
      building_id: building.id,
      type: 'wifi',
      bssid: '00:11:22:33:44:55',
      position: { floor_id: floor, x: 1, y: 1 },
    }),
    alarm: await created('/api/v1/alarms', { type: 'DANGER', building_id: building.id }),
    image: image.status === 201 || image.status === 200 ? String(image.body.id) : randomUUID(),
    apikey: '',
    organization: String(current.body?.id ?? randomUUID()),
  };
  await createApiKey(admin, 'read-only');
  const keys = await admin.get('/api/v1/auth/apikeys');
  ids.apikey = String((Array.isArray(keys.body) ? keys.body : (keys.body?.content ?? []))[0]?.id ?? randomUUID());
  return { admin, adminToken: tokens.access_token, ids };
}
