import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isWriteRoute } from '../../gateway/auth/authenticator.js';
import { can, confinedUserId } from '../../gateway/auth/permissions.js';
import type { RouteDefinition } from '../../gateway/http/route.js';
import type { Role } from '../../shared/storage/entities/index.js';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createApiKey, createOrganization, createUser, login } from '../../testkit/identity.js';
import { pngBytes, uploadImage } from '../../testkit/images.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

/**
 * The authorization matrix: every route x every role x every credential kind x own / colleague's / other
 * organization's object, each cell's status derived from the route's declared action and credential rules
 * (the role table in permissions.ts) plus a small table of route-specific rules below. A route without an
 * entry in ROUTES fails the test, so a new route must state how it is guarded.
 *
 * Requests that an allowed caller would use to change things send a no-op or an invalid body where that still
 * shows the guard (`{}` to a create route is 422 once every check has passed, 403 before); deletes that are
 * expected to succeed get a fresh object each, so one cell never removes another's fixture.
 */

const ROLES: Role[] = ['admin', 'user_manager', 'user'];
const CREDENTIALS = ['password', 'read-only', 'read-write', 'positioning'] as const;
type Credential = (typeof CREDENTIALS)[number];
type Target = 'own' | 'colleague' | 'other';
interface Cell {
  role: Role;
  credential: Credential;
  target: Target;
}

/** Collections whose objects belong to one user: "own" and "colleague's" are different objects there. */
const PERSONAL = new Set(['users', 'devices', 'apikeys', 'alarms']);

const confined = (cell: Cell) => confinedUserId({ role: cell.role, userId: 'caller' }) !== undefined;
const hiddenIfOther = (status: number) => (cell: Cell) => (cell.target === 'other' ? 404 : status);

interface Entry {
  /** Public routes take no credential: listed so that a route turning public is a visible change. */
  public?: true;
  query?: (fixtures: Fixtures, cell: Cell) => string;
  /** For a route without path parameters whose query names an object: also ask about the other organization's. */
  crossOrganization?: true;
  body?: unknown;
  /** Status once every check passes; default 200, 201 for POST, 204 for DELETE. */
  ok?: number;
  /** Route-specific expectation after the credential and action checks; undefined falls back to the generic rules. */
  rule?: (cell: Cell) => number | undefined;
}

const readable = (action: Parameters<typeof can>[1], ownReadable: boolean) => (cell: Cell) => {
  if (cell.target === 'other') return 404;
  if (can(cell.role, action)) return undefined;
  return ownReadable && cell.target === 'own' ? undefined : 403;
};
/** A search filter: another organization's building matches nothing (200, empty; access.test.ts checks nothing leaks). */
const filterOnly = (cell: Cell) => (cell.target === 'other' ? 200 : undefined);
const building = (fixtures: Fixtures, cell: Cell) => (cell.target === 'other' ? fixtures.other.buildings : fixtures.org.buildings);
const day = `${new Date().toISOString().slice(0, 10)}T00:00:00.000+00:00`;
const dateQuery = `?date=${encodeURIComponent(day)}`;

/** What each route expects beyond the generic rules (every route must be here). */
const ROUTES: Record<string, Entry> = {
  'GET /readyz': { public: true },
  'GET /healthz': { public: true },
  'GET /console': { public: true },
  'GET /console/assets/:file': { public: true },
  'GET /api/v1/openapi.json': { public: true },
  'GET /api/v1/asyncapi.json': { public: true },
  'GET /api/v1/docs': { public: true },
  'GET /api/v1/docs.js': { public: true },
  'POST /api/v1/auth/access_tokens': { public: true },
  'POST /api/v1/auth/refresh_access_tokens': { public: true },
  'GET /api/v1/version': {},

  'GET /api/v1/auth/apikeys': {},
  'POST /api/v1/auth/apikeys': { body: { permission: 'read-only' } },
  // Another user's key is not even shown to those who may not manage it.
  'DELETE /api/v1/auth/apikeys/:id': {
    rule: (cell) => (cell.target === 'other' || (cell.target === 'colleague' && !can(cell.role, 'apikeys:others')) ? 404 : undefined),
  },

  'GET /api/v1/organizations/current_organization': {},
  // Only the platform administrator creates organizations (nobody in this matrix is).
  'POST /api/v1/organizations': {
    body: { name: 'Matrix org', admin: { email: 'matrix-org@example.test', password: 'password-1' } },
    rule: () => 403,
  },

  'GET /api/v1/users': {},
  'GET /api/v1/users/:id': { rule: readable('users:read', true) },
  'POST /api/v1/users': { ok: 422 },
  'PUT /api/v1/users/:id': {},
  'PATCH /api/v1/users/:id': {},
  'DELETE /api/v1/users/:id': { rule: (cell) => (cell.target === 'own' ? 409 : undefined) },

  // Privacy (issue 32): windows follow the users and groups actions; erasure is admins' only. A matrix erasure
  // sends from after to (422 once every guard passed), and its progress route gets the user's id, which names no erasure.
  'GET /api/v1/users/:id/tracking_window': {},
  'PUT /api/v1/users/:id/tracking_window': { body: { time_zone: 'UTC', weekly: [] } },
  'DELETE /api/v1/users/:id/tracking_window': {},
  'GET /api/v1/groups/:id/tracking_window': {},
  'PUT /api/v1/groups/:id/tracking_window': { body: { time_zone: 'UTC', weekly: [] } },
  'DELETE /api/v1/groups/:id/tracking_window': {},
  'GET /api/v1/users/me/privacy': {},
  'POST /api/v1/users/:id/erasure': { body: { from: '2026-01-02T00:00:00Z', to: '2026-01-01T00:00:00Z' }, ok: 422 },
  'GET /api/v1/users/:id/erasure/:erasure_id': { ok: 404 },
  'GET /api/v1/users/:id/erasures': {},
  // A data export: one's own, or anyone's of the organization for admins (as reading a user, with its own action).
  'GET /api/v1/users/:id/data-export': { rule: readable('users:export-data', true) },
  // Privacy settings: read by everyone of the organization, set by admins (an empty body changes nothing).
  'GET /api/v1/organizations/current_organization/privacy_settings': {},
  'PUT /api/v1/organizations/current_organization/privacy_settings': { body: {} },

  'GET /api/v1/groups': {},
  'GET /api/v1/groups/:id': { rule: readable('groups:read', false) },
  'POST /api/v1/groups': { ok: 422 },
  'PUT /api/v1/groups/:id': {},
  'PATCH /api/v1/groups/:id': {},
  'DELETE /api/v1/groups/:id': {},

  'GET /api/v1/devices': {},
  'GET /api/v1/devices/:id': { rule: readable('devices:read', true) },
  'POST /api/v1/devices': { ok: 422 },
  'PUT /api/v1/devices/:id': {},
  'PATCH /api/v1/devices/:id': {},
  'DELETE /api/v1/devices/:id': {},

  'GET /api/v1/buildings': {},
  'GET /api/v1/buildings/:id': {},
  'POST /api/v1/buildings': { ok: 422 },
  'PUT /api/v1/buildings/:id': {},
  'PATCH /api/v1/buildings/:id': {},
  'DELETE /api/v1/buildings/:id': {},
  'GET /api/v1/buildings/:building_id/floors': {},
  'GET /api/v1/floors': {},
  'GET /api/v1/floors/:id': {},
  'POST /api/v1/floors': { ok: 422 },
  'PUT /api/v1/floors/:id': {},
  'PATCH /api/v1/floors/:id': {},
  'DELETE /api/v1/floors/:id': {},
  'GET /api/v1/poi_categories': {},
  'GET /api/v1/poi_categories/:id': {},
  'POST /api/v1/poi_categories': { ok: 422 },
  'PUT /api/v1/poi_categories/:id': {},
  'PATCH /api/v1/poi_categories/:id': {},
  'DELETE /api/v1/poi_categories/:id': {},
  'GET /api/v1/pois': {},
  'GET /api/v1/pois/:id': {},
  'POST /api/v1/pois': { ok: 422 },
  'PUT /api/v1/pois/:id': {},
  'PATCH /api/v1/pois/:id': {},
  'DELETE /api/v1/pois/:id': {},
  'POST /api/v1/pois_bulk': { ok: 422 },
  'GET /api/v1/buildings/:building_id/pois': {},
  'GET /api/v1/buildings/:building_id/exterior_pois': {},
  'GET /api/v1/projects/:building_id/points_of_interest': {},
  'GET /api/v1/projects/:building_id/exterior_pois': {},
  'GET /api/v1/events/:id': {},
  'POST /api/v1/events': { ok: 422 },
  'PUT /api/v1/events/:id': {},
  'PATCH /api/v1/events/:id': {},
  'DELETE /api/v1/events/:id': {},
  'GET /api/v1/buildings/:building_id/events': {},
  'GET /api/v1/projects/:building_id/events': {},
  'GET /api/v1/geofences/search': { query: (f, cell) => `?building_id=${building(f, cell)}`, crossOrganization: true, rule: filterOnly },
  'GET /api/v1/areas/search': { query: (f, cell) => `?building_id=${building(f, cell)}`, crossOrganization: true, rule: filterOnly },
  'GET /api/v1/geofences/:id': {},
  'POST /api/v1/geofences': { ok: 422 },
  'PUT /api/v1/geofences/:id': {},
  'PATCH /api/v1/geofences/:id': {},
  'DELETE /api/v1/geofences/:id': {},
  'GET /api/v1/areas/:id': {},
  'POST /api/v1/areas': { ok: 422 },
  'PUT /api/v1/areas/:id': {},
  'PATCH /api/v1/areas/:id': {},
  'DELETE /api/v1/areas/:id': {},
  'GET /api/v1/buildings/:building_id/paths': {},
  'GET /api/v1/projects/:building_id/paths': {},
  'GET /api/v1/paths': { query: (f, cell) => `?building_id=${building(f, cell)}`, crossOrganization: true, rule: filterOnly },
  'PUT /api/v1/buildings/:building_id/paths': { body: { nodes: [], links: [] } },
  // Routing: a point on a floor that is not the building's is refused (422) once every check has passed.
  'GET /api/v1/buildings/:building_id/route': {
    query: () => '?from_floor_id=999999&from_x=1&from_y=1&to_floor_id=999999&to_x=2&to_y=2',
    ok: 422,
  },
  'GET /api/v1/buildings/:building_id/nearest_devices': { query: () => '?floor_id=999999&x=1&y=1', ok: 422 },
  'GET /api/v1/infrastructure': { query: (f, cell) => `?building_id=${building(f, cell)}`, crossOrganization: true },
  'GET /api/v1/infrastructure/:id': {},
  'POST /api/v1/infrastructure': { ok: 422 },
  'PUT /api/v1/infrastructure/:id': {},
  'PATCH /api/v1/infrastructure/:id': {},
  'DELETE /api/v1/infrastructure/:id': {},
  'GET /api/v1/projects': {},
  'GET /api/v1/projects/:id': {},
  'GET /api/v1/projects/:building_id/floors': {},

  // Positioning keys upload; an empty batch is refused once the credential is accepted.
  'POST /api/v1/realtime/positions': { ok: 422 },
  'GET /api/v1/real_time/building/:building_id': {},
  'GET /api/v1/realtime/positions': {},
  'GET /api/v1/real_time/analytics/raw_pose_data': {
    query: (f, cell) => `${dateQuery}&building_id=${building(f, cell)}`,
    crossOrganization: true,
  },
  'GET /api/v1/analytics/raw_pose_data': { query: (f, cell) => `${dateQuery}&building_id=${building(f, cell)}`, crossOrganization: true },
  'GET /api/v1/real_time/export/:building_id': { query: () => dateQuery },
  // A device's trail (issue 30): the caller's building, any role (a plain user gets only their own fixes).
  'GET /api/v1/buildings/:building_id/trail': {
    query: () => `?device_id=matrix-trail&from=${encodeURIComponent(new Date(Date.now() - 3600_000).toISOString())}`,
  },

  'GET /api/v1/alarms': {},
  // A plain user reads only alarms about themself (confinedUserId).
  'GET /api/v1/alarms/:id': {
    rule: (cell) => (cell.target === 'other' ? 404 : cell.target === 'colleague' && confined(cell) ? 403 : undefined),
  },
  'POST /api/v1/alarms': { ok: 422 },
  // OPEN -> OPEN is no transition: 409 once the caller may manage the alarm, without changing it.
  'PATCH /api/v1/alarms/:id': { body: { state: 'OPEN' }, rule: hiddenIfOther(409) },
  'GET /api/v1/buildings/:id/alarm_settings': {},
  'PUT /api/v1/buildings/:id/alarm_settings': {},
  // Naming no alarm is 422 once the caller may manage alarms.
  'POST /api/v1/alarms/bulk': { body: {}, ok: 422 },
  'GET /api/v1/organizations/current_organization/alarm_settings': {},
  'PUT /api/v1/organizations/current_organization/alarm_settings': { body: {} },

  // Evacuations: declared by admins and user managers (a floor of no building: 422), read with tracking:read-all. The
  // matrix puts the building's id where the evacuation's goes, which is no evacuation id: 422 once the checks pass.
  'POST /api/v1/buildings/:id/evacuations': { body: { floor_ids: [999_999] }, ok: 422 },
  'GET /api/v1/buildings/:id/evacuations/:evacuation': { rule: () => 422 },
  'POST /api/v1/buildings/:id/evacuations/:evacuation/roll/:entry/safe': { rule: () => 422 },
  'GET /api/v1/buildings/:id/evacuations/:evacuation/roll/:entry/route': { rule: () => 422 },
  'POST /api/v1/buildings/:id/evacuations/:evacuation/end': { rule: () => 422 },
  'GET /api/v1/buildings/:id/evacuations/:evacuation/report.json': { rule: () => 422 },
  'GET /api/v1/buildings/:id/evacuations/:evacuation/report.csv': { rule: () => 422 },

  // Webhooks: admins only. A redelivery names a delivery; the matrix puts the webhook's id there, which names none.
  'GET /api/v1/webhooks': {},
  'POST /api/v1/webhooks': { ok: 422 },
  'GET /api/v1/webhooks/:id': {},
  'PATCH /api/v1/webhooks/:id': {},
  'DELETE /api/v1/webhooks/:id': {},
  'GET /api/v1/webhooks/:id/deliveries': {},
  'POST /api/v1/webhooks/:id/deliveries/:delivery_id/redeliver': { ok: 404 },

  'POST /api/v1/images': { ok: 415 },
  'GET /api/v1/images/:id': {},
  'DELETE /api/v1/images/:id': {},

  // Admins only (audit:read); another organization's entries are simply not in the caller's log.
  'GET /api/v1/audit': {},
  'GET /api/v1/audit.csv': {},
};
// Reports: every role may ask; without parameters the request is refused (422) once the checks have passed.
for (const name of [
  'geofencing_stay_time',
  'geofencing_sessions_matches',
  'visitors',
  'positioning_time',
  'heatmap',
  'raw_data',
  'user_positions',
]) {
  for (const format of ['json', 'csv']) ROUTES[`GET /api/v1/reports/${name}.${format}`] = { ok: 422 };
}

interface Caller {
  role: Role;
  userId: string;
  clients: Record<Credential, TestClient>;
  /** The same credentials as headers, for the WebSocket upgrade. */
  headers: Record<Credential, Record<string, string>>;
  /** The caller's own objects of the personal collections. */
  own: Record<string, string | number>;
}

interface Fixtures {
  /** Objects of the callers' organization (shared by all of them). */
  org: Record<string, string | number>;
  colleague: Record<string, string | number>;
  other: Record<string, string | number>;
}

/** The collection an item route is about: the path segment before its first parameter. */
const collectionOf = (path: string) => /\/([a-z_]+)\/:[a-z_]+/.exec(path)?.[1];
const ALIASES: Record<string, string> = { projects: 'buildings', building: 'buildings', export: 'buildings', areas: 'geofences' };

let counter = 0;
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}`;

/** Runs `tasks` with at most `limit` in flight. */
async function pool<T>(tasks: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < tasks.length) {
        const index = next++;
        results[index] = await tasks[index]!();
      }
    }),
  );
  return results;
}

describe(`authorization matrix (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let fixtures: Fixtures;
  const callers: Caller[] = [];
  let colleagueUserId: string;
  let venueFloor: number;

  /** Objects of one organization, one per collection, made by a client of that organization's admin. */
  async function organizationObjects(client: TestClient, ownerId: string) {
    const venue = await createVenue(client, `Matrix venue ${unique()}`);
    const floor = venue.floors[0].id;
    const position = { floor_id: floor, cartesians: { x: 1, y: 1 } };
    const created = async (path: string, body: unknown) => {
      const response = await client.post(path, body);
      expect(response.status, `${path}: ${response.text}`).toBe(201);
      return response.body.id as string | number;
    };
    const device = `matrix-${unique()}`;
    const objects: Record<string, string | number> = {
      buildings: venue.building.id,
      floors: floor,
      groups: await created('/api/v1/groups', { name: `Matrix group ${unique()}` }),
      poi_categories: await created('/api/v1/poi_categories', { name_en: 'Matrix category', code: `m${unique()}` }),
      pois: await created('/api/v1/pois', { building_id: venue.building.id, name: 'Matrix POI', position }),
      events: await created('/api/v1/events', {
        building_id: venue.building.id,
        name: 'Matrix event',
        position: { ...position, radius: 2 },
      }),
      geofences: await created('/api/v1/geofences', {
        building_id: venue.building.id,
        floor_id: floor,
        name: 'Matrix zone',
        type: 'CIRCLE',
        cartesians: [[5, 5]],
        radius: 2,
      }),
      infrastructure: await created('/api/v1/infrastructure', {
        building_id: venue.building.id,
        type: 'ble',
        name: 'Matrix beacon',
        uuid: 'f7826da6-4fa2-4e98-8024-bc5b71e0893e',
        major: 1,
        minor: counter++,
        position,
      }),
      images: (await uploadImage(client, pngBytes(2, 2))).body.id,
      devices: await created('/api/v1/devices', { identifier: device, user_id: ownerId }),
      deviceIdentifier: device,
      alarms: await created('/api/v1/alarms', { type: 'DANGER', device_id: device }),
      apikeys: await created('/api/v1/auth/apikeys', { permission: 'read-only', user_id: ownerId }),
      // `.invalid` never resolves (RFC 6761): the matrix's alarms cause no traffic outside.
      webhooks: await created('/api/v1/webhooks', { url: 'https://hooks.matrix.invalid/', events: ['alarm.raised'] }),
      users: ownerId,
    };
    return objects;
  }

  beforeAll(async () => {
    // Webhook fixtures point at `.invalid` names (RFC 6761: never resolve, so no traffic leaves); a name that does not
    // resolve is refused at creation unless private addresses are allowed, as here.
    running = await startTestGateway({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true' });
    admin = await adminClient(running.client);
    const colleague = await createUser(admin, 'user');
    colleagueUserId = colleague.user.id;
    const org = await organizationObjects(admin, colleague.user.id);
    venueFloor = org.floors as number;
    // The graph exists before the matrix PUTs it concurrently: two first PUTs racing to insert it are a 500
    // (find-then-create in paths.route.ts, reported to its owner), which is not what this test is about.
    expect((await admin.put(`/api/v1/buildings/${org.buildings}/paths`, { nodes: [], links: [] })).status).toBe(200);
    const foreign = await createOrganization(admin);
    const foreignUser = await createUser(foreign.client, 'user');
    fixtures = { org, colleague: org, other: await organizationObjects(foreign.client, foreignUser.user.id) };
    for (const role of ROLES) {
      const made = await createUser(admin, role);
      const headers: Record<Credential, Record<string, string>> = {
        password: { authorization: `Bearer ${(await login(running.client, made.email, made.password)).access_token}` },
        'read-only': { 'x-api-key': await createApiKey(made.client, 'read-only') },
        'read-write': { 'x-api-key': await createApiKey(made.client, 'read-write') },
        positioning: { 'x-api-key': await createApiKey(made.client, 'positioning') },
      };
      const clients = Object.fromEntries(
        CREDENTIALS.map((credential) => [credential, running.client.withHeaders(headers[credential])]),
      ) as Record<Credential, TestClient>;
      const device = `matrix-own-${unique()}`;
      const deviceId = (await admin.post('/api/v1/devices', { identifier: device, user_id: made.user.id })).body.id;
      const alarm = (await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: device })).body.id;
      const key = (await made.client.post('/api/v1/auth/apikeys', { permission: 'read-only', description: 'spare' })).body.id;
      callers.push({
        role,
        userId: made.user.id,
        clients,
        headers,
        own: { users: made.user.id, devices: deviceId, deviceIdentifier: device, alarms: alarm, apikeys: key },
      });
    }
  }, 120_000);
  afterAll(async () => running?.stop());

  /** A fresh object for a delete that is expected to succeed. */
  async function fresh(collection: string, caller: Caller, target: Target): Promise<string | number> {
    const made = async (path: string, body: unknown, client = admin) => {
      const response = await client.post(path, body);
      expect(response.status, `${path}: ${response.text}`).toBe(201);
      return response.body.id as string | number;
    };
    const buildingId = fixtures.org.buildings;
    const position = { floor_id: venueFloor, cartesians: { x: 1, y: 1 } };
    switch (collection) {
      case 'users':
        return made('/api/v1/users', { email: `gone-${unique()}@example.test`, password: 'password-1', role: 'user' });
      case 'devices':
        return made('/api/v1/devices', { identifier: `gone-${unique()}`, user_id: target === 'own' ? caller.userId : colleagueUserId });
      case 'apikeys':
        return target === 'own'
          ? made('/api/v1/auth/apikeys', { permission: 'read-only' }, caller.clients.password)
          : made('/api/v1/auth/apikeys', { permission: 'read-only', user_id: colleagueUserId });
      case 'groups':
        return made('/api/v1/groups', { name: `Gone ${unique()}` });
      case 'buildings':
        return (await createVenue(admin, `Gone ${unique()}`)).building.id;
      case 'floors':
        return made('/api/v1/floors', { building_id: buildingId, level: 10 + counter++, name: 'Gone' });
      case 'poi_categories':
        return made('/api/v1/poi_categories', { name_en: 'Gone', code: `g${unique()}` });
      case 'pois':
        return made('/api/v1/pois', { building_id: buildingId, name: 'Gone', position });
      case 'events':
        return made('/api/v1/events', { building_id: buildingId, name: 'Gone', position: { ...position, radius: 2 } });
      case 'geofences':
        return made('/api/v1/geofences', {
          building_id: buildingId,
          floor_id: venueFloor,
          name: 'Gone',
          type: 'CIRCLE',
          cartesians: [[5, 5]],
          radius: 2,
        });
      case 'infrastructure':
        return made('/api/v1/infrastructure', {
          building_id: buildingId,
          type: 'ble',
          name: 'Gone',
          uuid: 'f7826da6-4fa2-4e98-8024-bc5b71e0893e',
          major: 2,
          minor: counter++,
          position,
        });
      case 'images':
        return (await uploadImage(admin, pngBytes(2, 2))).body.id;
      case 'webhooks':
        return made('/api/v1/webhooks', { url: 'https://hooks.gone.invalid/', events: ['geofence.enter'] });
      default:
        throw new Error(`no fresh-object factory for ${collection}`);
    }
  }

  function expected(route: RouteDefinition, entry: Entry, cell: Cell): number {
    if (cell.credential === 'positioning' && !route.allowPositioningKey) return 403;
    if (cell.credential === 'read-only' && isWriteRoute(route)) return 403;
    if (route.action && !can(cell.role, route.action)) return 403;
    const special = entry.rule?.(cell);
    if (special !== undefined) return special;
    if (cell.target === 'other') return 404;
    return entry.ok ?? (route.method === 'POST' ? 201 : route.method === 'DELETE' ? 204 : 200);
  }

  it('has an entry for every route, and none for a route that is gone', () => {
    const keys = running.gateway.routes.map((route) => `${route.method} ${route.path}`);
    expect(
      keys.filter((key) => !(key in ROUTES)),
      'routes without a matrix entry: add them to ROUTES',
    ).toEqual([]);
    expect(
      Object.keys(ROUTES).filter((key) => !keys.includes(key)),
      'matrix entries of routes that no longer exist',
    ).toEqual([]);
    const publicRoutes = running.gateway.routes.filter((route) => route.auth === 'public').map((route) => `${route.method} ${route.path}`);
    expect(publicRoutes.sort()).toEqual(
      Object.keys(ROUTES)
        .filter((key) => ROUTES[key]!.public)
        .sort(),
    );
  });

  it('answers every route x role x credential x object as the role table says', async () => {
    const mismatches: string[] = [];
    const cells: { route: RouteDefinition; entry: Entry; caller: Caller; cell: Cell }[] = [];
    for (const route of running.gateway.routes) {
      const entry = ROUTES[`${route.method} ${route.path}`];
      if (!entry || entry.public) continue;
      const collection = collectionOf(route.path);
      const targets: Target[] =
        collection === undefined
          ? entry.crossOrganization
            ? ['own', 'other']
            : ['own']
          : PERSONAL.has(collection)
            ? ['own', 'colleague', 'other']
            : ['own', 'other'];
      for (const caller of callers) {
        for (const credential of CREDENTIALS)
          for (const target of targets) cells.push({ route, entry, caller, cell: { role: caller.role, credential, target } });
      }
    }
    const run = async ({ route, entry, caller, cell }: (typeof cells)[number]) => {
      const want = expected(route, entry, cell);
      const rawCollection = collectionOf(route.path);
      let path = route.path;
      if (rawCollection !== undefined) {
        const collection = ALIASES[rawCollection] ?? rawCollection;
        let id: string | number | undefined;
        if (route.method === 'DELETE' && want >= 200 && want < 300) id = await fresh(collection, caller, cell.target);
        else if (cell.target === 'other') id = fixtures.other[collection];
        else if (PERSONAL.has(collection)) id = cell.target === 'own' ? caller.own[collection] : fixtures.colleague[collection];
        else id = fixtures.org[collection];
        expect(id, `fixture for ${collection}`).toBeDefined();
        path = path.replace(/:[a-z_]+/g, String(id));
      }
      path += entry.query?.(fixtures, cell) ?? '';
      const body = route.method === 'GET' || route.method === 'DELETE' ? undefined : (entry.body ?? {});
      const response = await caller.clients[cell.credential].request(route.method, path, body === undefined ? {} : { body });
      if (response.status !== want) {
        mismatches.push(
          `${route.method} ${route.path} as ${cell.role}/${cell.credential} on ${cell.target}: ${response.status}, expected ${want} ${response.text.slice(0, 160)}`,
        );
      }
    };
    // Deletes last, so an unexpected success cannot take away a fixture a later read relies on.
    const reads = cells.filter(({ route }) => route.method !== 'DELETE');
    const deletes = cells.filter(({ route }) => route.method === 'DELETE');
    await pool(
      reads.map((cell) => () => run(cell)),
      4,
    );
    await pool(
      deletes.map((cell) => () => run(cell)),
      2,
    );
    expect(mismatches).toEqual([]);
  }, 600_000);

  it('accepts or refuses every WebSocket topic subscription per role, credential and object', async () => {
    const mismatches: string[] = [];
    const topics = (target: Target, caller: Caller): Record<string, string> => {
      const place = target === 'other' ? fixtures.other : fixtures.org;
      const device =
        target === 'own'
          ? caller.own.deviceIdentifier
          : target === 'colleague'
            ? fixtures.colleague.deviceIdentifier
            : fixtures.other.deviceIdentifier;
      return {
        'buildings/{id}/positions': `buildings/${place.buildings}/positions`,
        'buildings/{id}/geofence-events': `buildings/${place.buildings}/geofence-events`,
        'buildings/{id}/alarms': `buildings/${place.buildings}/alarms`,
        'organization/alarms': 'organization/alarms',
        'devices/{id}': `devices/${device}`,
      };
    };
    /**
     * What a subscription gets: 'subscribed' or the error status. Only acceptance is checked here: what a
     * confined user then receives on an accepted topic is the WebSocket tests' concern.
     */
    const expectedTopic = (pattern: string, cell: Cell): 'subscribed' | number => {
      if (cell.credential === 'positioning') return 403;
      if (pattern === 'organization/alarms') return 'subscribed';
      if (cell.target === 'other') return 404;
      if (pattern === 'devices/{id}' && cell.target === 'colleague' && !can(cell.role, 'devices:read')) return 403;
      return 'subscribed';
    };
    for (const caller of callers) {
      for (const credential of CREDENTIALS) {
        const socket = await TestSocket.open(running.baseUrl, { headers: caller.headers[credential] });
        try {
          for (const target of ['own', 'colleague', 'other'] as const) {
            for (const [pattern, topic] of Object.entries(topics(target, caller))) {
              const cell = { role: caller.role, credential, target };
              const reply = await socket.request({ op: 'subscribe', topics: [topic] });
              const got = reply.op === 'subscribed' ? 'subscribed' : reply.status;
              const want = expectedTopic(pattern, cell);
              if (got !== want)
                mismatches.push(`${topic} as ${caller.role}/${credential} on ${target}: ${JSON.stringify(reply)}, expected ${want}`);
              if (reply.op === 'subscribed') await socket.request({ op: 'unsubscribe', topics: [topic] });
              if (!pattern.endsWith('alarms')) continue;
              // Replay (since_seq) is accepted or refused exactly like the live subscription.
              const replayed = await socket.request({ op: 'subscribe', topics: [topic], since_seq: 0 });
              const gotReplay = replayed.op === 'subscribed' ? 'subscribed' : replayed.status;
              if (gotReplay !== want)
                mismatches.push(
                  `${topic} since_seq=0 as ${caller.role}/${credential} on ${target}: ${JSON.stringify(replayed)}, expected ${want}`,
                );
              if (replayed.op === 'subscribed') await socket.request({ op: 'unsubscribe', topics: [topic] });
            }
          }
        } finally {
          socket.close();
        }
      }
    }
    expect(mismatches).toEqual([]);
  }, 120_000);

  it('drops a devices/{id} subscription when the device is handed to a colleague, for exactly the roles that may not read it', async () => {
    const mismatches: string[] = [];
    for (const caller of callers) {
      for (const credential of ['password', 'read-only', 'read-write'] as const) {
        const identifier = `matrix-handed-${unique()}`;
        const device = (await admin.post('/api/v1/devices', { identifier, user_id: caller.userId })).body;
        const socket = await TestSocket.open(running.baseUrl, { headers: caller.headers[credential] });
        try {
          const topic = `devices/${identifier}`;
          expect(await socket.request({ op: 'subscribe', topics: [topic] })).toMatchObject({ op: 'subscribed' });
          expect((await admin.put(`/api/v1/devices/${device.id}`, { user_id: colleagueUserId })).status).toBe(200);
          const keeps = can(caller.role, 'devices:read');
          const dropped = keeps
            ? undefined
            : await socket.next((frame) => frame.op === 'unsubscribed' && frame.topics?.includes(topic)).catch(() => undefined);
          const again = await socket.request({ op: 'subscribe', topics: [topic] });
          const got = { dropped: dropped?.status ?? null, resubscribe: again.op === 'subscribed' ? 'subscribed' : again.status };
          const want = keeps ? { dropped: null, resubscribe: 'subscribed' } : { dropped: 403, resubscribe: 403 };
          if (JSON.stringify(got) !== JSON.stringify(want))
            mismatches.push(`${caller.role}/${credential}: ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
          if (keeps && socket.frames.some((frame) => frame.op === 'unsubscribed'))
            mismatches.push(`${caller.role}/${credential}: dropped though it may read the device`);
        } finally {
          socket.close();
          await socket.closed(); // its slot of the socket quotas is back before the next test counts them
        }
      }
    }
    expect(mismatches).toEqual([]);
  }, 120_000);

  it('caps authenticated sockets per credential for every role and credential kind (429 past WS_MAX_SOCKETS_PER_CREDENTIAL)', async () => {
    const cap = running.gateway.services.config.WS_MAX_SOCKETS_PER_CREDENTIAL;
    // Sockets of earlier tests give their slots back as they close: counted from none open.
    for (let attempt = 0; attempt < 200 && running.gateway.services.websockets.stats().connections > 0; attempt++)
      await new Promise((resolve) => setTimeout(resolve, 25));
    const mismatches: string[] = [];
    for (const caller of callers) {
      for (const credential of CREDENTIALS) {
        const outcomes = await Promise.allSettled(
          Array.from({ length: cap + 1 }, () => TestSocket.open(running.baseUrl, { headers: caller.headers[credential] })),
        );
        const opened = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
        const refused = outcomes.flatMap((outcome) =>
          outcome.status === 'rejected' ? [(outcome.reason as { statusCode?: number }).statusCode] : [],
        );
        if (opened.length !== cap || JSON.stringify(refused) !== '[429]')
          mismatches.push(`${caller.role}/${credential}: ${opened.length} opened, refused ${JSON.stringify(refused)}`);
        for (const socket of opened) socket.close();
        await Promise.all(opened.map((socket) => socket.closed()));
      }
    }
    expect(mismatches).toEqual([]);
  }, 120_000);

  it('lets only administrators give a key its own rates, and only up to the platform maximum (issue 28 item 2)', async () => {
    const mismatches: string[] = [];
    const maximum = running.gateway.services.config.RATE_LIMIT_MAX_REQUESTS_PER_SECOND;
    for (const caller of callers) {
      for (const credential of CREDENTIALS) {
        const cell = { role: caller.role, credential, target: 'own' as const };
        const client = caller.clients[credential];
        const within = await client.post('/api/v1/auth/apikeys', { permission: 'read-only', requests_per_second: 10 });
        const wantWithin = credential === 'positioning' || credential === 'read-only' ? 403 : can(cell.role, 'apikeys:rates') ? 201 : 403;
        if (within.status !== wantWithin)
          mismatches.push(`rate 10 as ${caller.role}/${credential}: ${within.status}, expected ${wantWithin}`);
        if (within.status === 201 && within.body.requests_per_second !== 10)
          mismatches.push(`rate 10 as ${caller.role}/${credential} read back ${within.body.requests_per_second}`);
        if (within.status === 201) await client.delete(`/api/v1/auth/apikeys/${within.body.id}`);
        // Past the maximum, or past what the column holds, is a validation error for everyone who gets that far.
        for (const rate of [maximum + 1, 3_000_000_000]) {
          const over = await client.post('/api/v1/auth/apikeys', {
            permission: 'read-only',
            requests_per_second: rate,
            poses_per_second: rate,
          });
          const wantOver = credential === 'positioning' || credential === 'read-only' ? 403 : 422;
          if (over.status !== wantOver)
            mismatches.push(`rate ${rate} as ${caller.role}/${credential}: ${over.status}, expected ${wantOver}`);
        }
      }
    }
    expect(mismatches).toEqual([]);
  }, 120_000);

  it('lets a user_manager change the sign-in of plain users only, never of a peer user_manager (L10)', async () => {
    const mismatches: string[] = [];
    for (const caller of callers) {
      for (const targetRole of ['user_manager', 'user'] as const) {
        const target = await createUser(admin, targetRole);
        const response = await caller.clients.password.patch(`/api/v1/users/${target.user.id}`, { password: 'reset-by-matrix' });
        const want = !can(caller.role, 'users:write') ? 403 : caller.role === 'admin' || targetRole === 'user' ? 200 : 403;
        if (response.status !== want) mismatches.push(`${caller.role} resets a ${targetRole}: ${response.status}, expected ${want}`);
      }
    }
    expect(mismatches).toEqual([]);
  }, 120_000);
});
