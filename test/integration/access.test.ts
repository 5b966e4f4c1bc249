import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createApiKey, createOrganization, createUser, login } from '../../testkit/identity.js';
import { pngBytes, uploadImage } from '../../testkit/images.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

describe(`organizations, users, groups, devices (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  beforeAll(async () => {
    // The webhook fixture's `.invalid` name never resolves: accepted at creation only with private addresses allowed.
    running = await startTestGateway({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true' });
    admin = await adminClient(running.client);
  });
  afterAll(async () => running?.stop());

  describe('organizations', () => {
    it('the platform administrator creates an organization with its first admin; nobody else may', async () => {
      const { organization, client } = await createOrganization(admin, 'Hospital Norte');
      expect(organization).toMatchObject({ name: 'Hospital Norte', admin: { role: 'admin', platform_admin: false } });
      const current = await client.get('/api/v1/organizations/current_organization');
      expect(current.body).toEqual({
        id: organization.id,
        name: 'Hospital Norte',
        created_at: organization.created_at,
        updated_at: organization.updated_at,
      });
      const refused = await client.post('/api/v1/organizations', { name: 'Nope', admin: { email: 'n@o.pe', password: 'password-1' } });
      expect(refused.status).toBe(403);
    });

    it('creates an organization whose admin e-mail is held in another one: e-mails are unique per organization (issue 28, L1)', async () => {
      const response = await admin.post('/api/v1/organizations', {
        name: 'Dup',
        admin: { email: 'admin@example.test', password: 'password-1' },
      });
      expect(response.status).toBe(201);
      expect(response.body.admin).toMatchObject({ email: 'admin@example.test', organization_id: response.body.id, platform_admin: false });
      const signedIn = await login(admin.withHeaders({ authorization: '' }), 'admin@example.test', 'password-1');
      expect(JSON.parse(Buffer.from(signedIn.access_token.split('.')[1]!, 'base64url').toString()).organization_uuid).toBe(
        response.body.id,
      );
    });
  });

  describe('role matrix over the API', () => {
    it('a user reads, but may not manage people', async () => {
      const { client, user } = await createUser(admin, 'user');
      expect((await client.get('/api/v1/organizations/current_organization')).status).toBe(200);
      expect((await client.get(`/api/v1/users/${user.id}`)).status).toBe(200); // themself
      expect((await client.get('/api/v1/users')).status).toBe(403);
      expect((await client.post('/api/v1/users', { email: 'x1@example.test', password: 'password-1' })).status).toBe(403);
      expect((await client.post('/api/v1/groups', { name: 'g' })).status).toBe(403);
      expect((await client.post('/api/v1/devices', { identifier: 'd' })).status).toBe(403);
      expect((await client.get('/api/v1/devices')).status).toBe(403);
      // Their own API keys they do manage.
      expect((await client.post('/api/v1/auth/apikeys', { permission: 'read-only' })).status).toBe(201);
    });

    it('a user manager manages users, groups and devices, but cannot create or touch an admin', async () => {
      const manager = await createUser(admin, 'user_manager');
      const created = await manager.client.post('/api/v1/users', { email: 'managed@example.test', password: 'password-1', role: 'user' });
      expect(created.status).toBe(201);
      expect(
        (await manager.client.post('/api/v1/users', { email: 'boss@example.test', password: 'password-1', role: 'admin' })).status,
      ).toBe(403);
      const anAdmin = await createUser(admin, 'admin');
      expect((await manager.client.put(`/api/v1/users/${anAdmin.user.id}`, { full_name: 'renamed' })).status).toBe(403);
      expect((await manager.client.delete(`/api/v1/users/${anAdmin.user.id}`)).status).toBe(403);
      expect((await manager.client.post('/api/v1/groups', { name: `team-${Date.now()}` })).status).toBe(201);
      expect((await manager.client.post('/api/v1/devices', { identifier: `dev-${Date.now()}` })).status).toBe(201);
      // Other users' API keys are for admins only.
      expect((await manager.client.get(`/api/v1/auth/apikeys?user_id=${created.body.id}`)).status).toBe(403);
    });

    it('an admin manages other users’ API keys', async () => {
      const member = await createUser(admin, 'user');
      const created = await admin.post('/api/v1/auth/apikeys', { permission: 'read-only', user_id: member.user.id });
      expect(created.status).toBe(201);
      expect(created.body.user_id).toBe(member.user.id);
      const listed = await admin.get(`/api/v1/auth/apikeys?user_id=${member.user.id}`);
      expect(listed.body.map((key: { id: string }) => key.id)).toEqual([created.body.id]);
    });

    it('a role change takes effect on the user’s existing token', async () => {
      const promoted = await createUser(admin, 'user');
      expect((await promoted.client.get('/api/v1/users')).status).toBe(403);
      expect((await admin.put(`/api/v1/users/${promoted.user.id}`, { role: 'user_manager' })).status).toBe(200);
      expect((await promoted.client.get('/api/v1/users')).status).toBe(200);
    });

    it('nobody changes their own role or deletes themself', async () => {
      const me = (await admin.get('/api/v1/auth/apikeys')).status; // warm-up: admin is valid
      expect(me).toBe(200);
      const self = await createUser(admin, 'admin');
      expect((await self.client.put(`/api/v1/users/${self.user.id}`, { role: 'user' })).status).toBe(409);
      expect((await self.client.delete(`/api/v1/users/${self.user.id}`)).status).toBe(409);
    });
  });

  describe('users', () => {
    it('create, read, update (PUT and PATCH partial), delete, with the official client’s role names', async () => {
      const created = await admin.post('/api/v1/users', {
        email: 'Jane@Example.test',
        password: 'password-1',
        full_name: 'Jane Roe',
        role: 'ZONE_MANAGER',
        code: 'J-1',
        building_ids: [3, 4],
        accept_terms: true,
        is_manager: true,
      });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({
        email: 'jane@example.test',
        full_name: 'Jane Roe',
        role: 'user_manager',
        code: 'J-1',
        building_ids: [3, 4],
        groups: [],
      });
      expect(created.body).not.toHaveProperty('password');
      expect(created.body).not.toHaveProperty('password_hash');
      const id = created.body.id;
      const put = await admin.put(`/api/v1/users/${id}`, { full_name: 'Jane Doe' });
      expect(put.body).toMatchObject({ full_name: 'Jane Doe', code: 'J-1', role: 'user_manager' });
      const patch = await admin.patch(`/api/v1/users/${id}`, { role: 'USER' });
      expect(patch.body.role).toBe('user');
      expect((await admin.get(`/api/v1/users/${id}`)).body.full_name).toBe('Jane Doe');
      expect((await admin.delete(`/api/v1/users/${id}`)).status).toBe(204);
      expect((await admin.get(`/api/v1/users/${id}`)).status).toBe(404);
    });

    it('refuses bad input with 422 naming the field, and a duplicate e-mail with 409', async () => {
      const bad = await admin.post('/api/v1/users', { email: 'not-an-email', password: 'short', role: 'emperor' });
      expect(bad.status).toBe(422);
      expect(bad.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['email', 'password', 'role']);
      await admin.post('/api/v1/users', { email: 'twice@example.test', password: 'password-1' });
      const twice = await admin.post('/api/v1/users', { email: 'TWICE@example.test', password: 'password-1' });
      expect(twice.status).toBe(409);
    });

    it('puts a user in at most one group', async () => {
      const group = await admin.post('/api/v1/groups', { name: 'Night shift' });
      const other = await admin.post('/api/v1/groups', { name: 'Day shift' });
      const user = await admin.post('/api/v1/users', { email: 'grouped@example.test', password: 'password-1', group_ids: [group.body.id] });
      expect(user.body.groups).toEqual([group.body.id]);
      const two = await admin.put(`/api/v1/users/${user.body.id}`, { groups: [group.body.id, other.body.id] });
      expect(two.status).toBe(422);
      const moved = await admin.put(`/api/v1/users/${user.body.id}`, { groups: other.body.id });
      expect(moved.body.groups).toEqual([other.body.id]);
      const unknown = await admin.put(`/api/v1/users/${user.body.id}`, { groups: '00000000-0000-4000-8000-000000000000' });
      expect(unknown.status).toBe(422);
      expect(unknown.body.errors[0].field).toBe('groups');
      expect((await admin.delete(`/api/v1/groups/${other.body.id}`)).status).toBe(204);
      expect((await admin.get(`/api/v1/users/${user.body.id}`)).body.groups).toEqual([]);
    });

    it('lists paginated with the filters the official client sends', async () => {
      const group = await admin.post('/api/v1/groups', { name: 'Filter group' });
      const made = [];
      for (let i = 0; i < 5; i++) {
        const response = await admin.post('/api/v1/users', {
          email: `page-${i}@filter.test`,
          password: 'password-1',
          full_name: `Filter Person ${i}`,
          code: `F${i}`,
          building_ids: i < 2 ? [77] : [],
          ...(i === 4 ? { groups: group.body.id } : {}),
        });
        made.push(response.body);
      }
      const page = await admin.get('/api/v1/users?full_name=filter+person&page=1&size=2&sort=email,asc');
      expect(page.status).toBe(200);
      expect(page.body.metadata).toEqual({
        first: false,
        last: false,
        total_pages: 3,
        total_elements: 5,
        number_of_elements: 2,
        size: 2,
        number: 1,
      });
      expect(page.body.data.map((u: { email: string }) => u.email)).toEqual(['page-2@filter.test', 'page-3@filter.test']);
      const byBuilding = await admin.get('/api/v1/users?building_ids%5B%5D=77&building_ids%5B%5D=78');
      expect(byBuilding.body.data.map((u: { code: string }) => u.code).sort()).toEqual(['F0', 'F1']);
      const byIds = await admin.get(`/api/v1/users?ids[]=${made[0].id}&ids[]=${made[3].id}&exclude_ids[]=${made[3].id}`);
      expect(byIds.body.data.map((u: { id: string }) => u.id)).toEqual([made[0].id]);
      const byGroup = await admin.get(`/api/v1/users?group_ids[]=${group.body.id}`);
      expect(byGroup.body.data.map((u: { code: string }) => u.code)).toEqual(['F4']);
      const byCodes = await admin.get('/api/v1/users?codes[]=F1&codes[]=F2&sort=code&direction=desc');
      expect(byCodes.body.data.map((u: { code: string }) => u.code)).toEqual(['F2', 'F1']);
      const withoutBuildings = await admin.get('/api/v1/users?has_buildings=false&full_name=filter');
      expect(withoutBuildings.body.data.map((u: { code: string }) => u.code).sort()).toEqual(['F2', 'F3', 'F4']);
      const withBuildings = await admin.get('/api/v1/users?has_buildings=true&full_name=filter');
      expect(withBuildings.body.data.map((u: { code: string }) => u.code).sort()).toEqual(['F0', 'F1']);
      expect((await admin.get('/api/v1/users?size=1001')).status).toBe(422);
      expect((await admin.get('/api/v1/users?sort=password_hash')).status).toBe(422);
      expect((await admin.get('/api/v1/users?ids=')).status).toBe(422);
    });
  });

  describe('devices', () => {
    it('create with an owner, update, list only assigned ones, refuse duplicates and foreign owners', async () => {
      const owner = await createUser(admin, 'user');
      const device = await admin.post('/api/v1/devices', { identifier: 'phone-001', name: 'Ward phone', user_id: owner.user.id });
      expect(device.status).toBe(201);
      expect(device.body).toMatchObject({ identifier: 'phone-001', name: 'Ward phone', user_id: owner.user.id });
      const loose = await admin.post('/api/v1/devices', { identifier: 'phone-002' });
      expect(loose.body.user_id).toBeNull();
      expect((await admin.post('/api/v1/devices', { identifier: 'phone-001' })).status).toBe(409);
      const assigned = await admin.get('/api/v1/devices?only_assigned=true');
      expect(assigned.body.data.map((d: { identifier: string }) => d.identifier)).toEqual(['phone-001']);
      // The owner reads their own device, not others.
      expect((await owner.client.get(`/api/v1/devices/${device.body.id}`)).status).toBe(200);
      expect((await owner.client.get(`/api/v1/devices/${loose.body.id}`)).status).toBe(403);
      const unassigned = await admin.put(`/api/v1/devices/${device.body.id}`, { user_id: null });
      expect(unassigned.body.user_id).toBeNull();
      const { organization } = await createOrganization(admin);
      const foreign = await admin.put(`/api/v1/devices/${device.body.id}`, { user_id: organization.admin.id });
      expect(foreign.status).toBe(422);
    });
  });

  describe('isolation between organizations', () => {
    it('a second organization’s admin gets nothing of the first on any route', async () => {
      // Fixtures of the first organization, one per resource that has an :id route.
      const member = await createUser(admin, 'user');
      const group = (await admin.post('/api/v1/groups', { name: 'Secret group' })).body;
      const device = (await admin.post('/api/v1/devices', { identifier: 'secret-device', user_id: member.user.id })).body;
      const keyId = (await admin.post('/api/v1/auth/apikeys', { permission: 'read-only' })).body.id;
      const imageId = (await uploadImage(admin, pngBytes(2, 2))).body.id;
      const firstOrganization = (await admin.get('/api/v1/organizations/current_organization')).body.id;
      const venue = await createVenue(admin, 'Secret venue');
      const floor = venue.floors[0].id;
      const poi = (
        await admin.post('/api/v1/pois', {
          building_id: venue.building.id,
          name: 'Secret POI',
          position: { floor_id: floor, cartesians: { x: 1, y: 1 } },
        })
      ).body;
      const event = (
        await admin.post('/api/v1/events', {
          building_id: venue.building.id,
          name: 'Secret event',
          position: { floor_id: floor, radius: 2, cartesians: { x: 1, y: 1 } },
        })
      ).body;
      const geofence = (
        await admin.post('/api/v1/geofences', {
          building_id: venue.building.id,
          floor_id: floor,
          name: 'Secret zone',
          type: 'CIRCLE',
          cartesians: [[5, 5]],
          radius: 2,
        })
      ).body;
      const category = (await admin.post('/api/v1/poi_categories', { name_en: 'Secret category', code: 'secret' })).body;
      const beacon = (
        await admin.post('/api/v1/infrastructure', {
          building_id: venue.building.id,
          type: 'ble',
          name: 'Secret beacon',
          uuid: 'f7826da6-4fa2-4e98-8024-bc5b71e0893e',
          major: 1,
          minor: 2,
          position: { floor_id: floor, cartesians: { x: 1, y: 1 } },
        })
      ).body;
      const alarm = (await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: 'secret-device', comment: 'Secret alarm' })).body;
      const webhook = (await admin.post('/api/v1/webhooks', { url: 'https://secret-hook.example.invalid/', events: ['geofence.exit'] }))
        .body;
      const drill = (await admin.post(`/api/v1/buildings/${venue.building.id}/evacuations`, { drill: true, note: 'Secret drill' })).body;
      /** The first organization's object for each collection that has an item route (by the segment before the parameter). */
      const fixtures: Record<string, string | number> = {
        users: member.user.id,
        groups: group.id,
        devices: device.id,
        apikeys: keyId,
        images: imageId,
        buildings: venue.building.id,
        projects: venue.building.id,
        floors: floor,
        pois: poi.id,
        events: event.id,
        geofences: geofence.id,
        areas: geofence.id,
        poi_categories: category.id,
        infrastructure: beacon.id,
        alarms: alarm.id,
        webhooks: webhook.id,
        building: venue.building.id,
        export: venue.building.id,
      };
      const bodies: Record<string, unknown> = {
        'PUT /api/v1/buildings/:building_id/paths': { nodes: [], links: [] },
        'POST /api/v1/buildings/:id/evacuations/:evacuation/roll/:entry/safe': { comment: 'c' },
        'PATCH /api/v1/alarms/:id': { state: 'CLOSED' },
        'PUT /api/v1/users/:id/tracking_window': { time_zone: 'Europe/Madrid', weekly: [{ day: 'mon', from: '08:00', to: '17:00' }] },
        'PUT /api/v1/groups/:id/tracking_window': { time_zone: 'Europe/Madrid', weekly: [{ day: 'mon', from: '08:00', to: '17:00' }] },
      };
      /** Routes with several ids of different kinds: each filled with the first organization's own. */
      const evacuation = `/api/v1/buildings/${venue.building.id}/evacuations/${drill.id}`;
      const paths: Record<string, string> = {
        'GET /api/v1/buildings/:id/evacuations/:evacuation': evacuation,
        'POST /api/v1/buildings/:id/evacuations/:evacuation/roll/:entry/safe': `${evacuation}/roll/${encodeURIComponent('device:secret-device')}/safe`,
        'GET /api/v1/buildings/:id/evacuations/:evacuation/roll/:entry/route': `${evacuation}/roll/${encodeURIComponent('device:secret-device')}/route`,
        'POST /api/v1/buildings/:id/evacuations/:evacuation/end': `${evacuation}/end`,
        'GET /api/v1/buildings/:id/evacuations/:evacuation/report.json': `${evacuation}/report.json`,
        'GET /api/v1/buildings/:id/evacuations/:evacuation/report.csv': `${evacuation}/report.csv`,
      };
      const queries: Record<string, string> = {
        'GET /api/v1/real_time/export/:building_id': '?date=2026-01-01T00:00:00.000%2B00:00',
        'GET /api/v1/buildings/:building_id/route': `?from_floor_id=${floor}&from_x=1&from_y=1&to_floor_id=${floor}&to_x=2&to_y=2`,
        'GET /api/v1/buildings/:building_id/nearest_devices': `?floor_id=${floor}&x=1&y=1`,
        'GET /api/v1/buildings/:building_id/trail': '?device_id=secret-device&from=2026-01-01T00:00:00Z&to=2026-01-01T01:00:00Z',
      };
      const secrets = [
        member.user.id,
        group.id,
        device.id,
        keyId,
        imageId,
        firstOrganization,
        geofence.id,
        'Secret venue',
        'Secret POI',
        'Secret event',
        'Secret zone',
        'Secret category',
        'Secret beacon',
        alarm.id,
        webhook.id,
        'secret-hook',
      ];

      const { client: intruder } = await createOrganization(admin);
      await createApiKey(intruder, 'read-write');
      for (const route of running.gateway.routes) {
        if (route.auth === 'public') continue;
        if (route.path.includes(':')) {
          const collection = /\/([a-z_]+)\/:[a-z_]+/.exec(route.path)![1]!;
          const id = fixtures[collection];
          expect(id, `add an isolation fixture for ${route.path}`).toBeDefined();
          const key = `${route.method} ${route.path}`;
          const path = (paths[key] ?? route.path.replace(/:[a-z_]+/g, String(id))) + (queries[key] ?? '');
          const body = bodies[`${route.method} ${route.path}`] ?? {};
          const response = await intruder.request(route.method, path, route.method === 'GET' || route.method === 'DELETE' ? {} : { body });
          expect(response.status, `${route.method} ${route.path}`).toBe(404);
        } else if (route.method === 'GET') {
          for (const query of [
            '',
            `?building_id=${venue.building.id}`,
            `?building_ids=${venue.building.id}`,
            `?organization_id=${firstOrganization}`,
          ]) {
            const response = await intruder.request('GET', route.path + query);
            for (const secret of secrets) expect(response.text, `${route.path}${query} leaked ${secret}`).not.toContain(secret);
          }
        }
      }
      expect((await intruder.get(`/api/v1/infrastructure?building_id=${venue.building.id}`)).status).toBe(404);
      // Naming the first organization's building or floor in a body reaches nothing either.
      const crossPoi = await intruder.post('/api/v1/pois', {
        building_id: venue.building.id,
        name: 'x',
        position: { floor_id: floor, cartesians: { x: 1, y: 1 } },
      });
      expect(crossPoi.status).toBe(422);
      expect((await admin.get(`/api/v1/buildings/${venue.building.id}`)).body.indoor_pois.map((p: { name: string }) => p.name)).toEqual([
        'Secret POI',
      ]);
      expect((await admin.get(`/api/v1/geofences/${geofence.id}`)).body.deleted).toBe(false);
      expect((await admin.get(`/api/v1/alarms/${alarm.id}`)).body.state).toBe('OPEN');
      // Nothing was changed or deleted by those attempts.
      expect((await admin.get(`/api/v1/groups/${group.id}`)).body.name).toBe('Secret group');
      expect((await admin.get(`/api/v1/devices/${device.id}`)).status).toBe(200);
      // And naming the other organization's objects in a body does not reach them either.
      const crossGroup = await intruder.post('/api/v1/users', { email: 'cross@other.test', password: 'password-1', groups: group.id });
      expect(crossGroup.status).toBe(422);
      const crossKey = await intruder.get(`/api/v1/auth/apikeys?user_id=${member.user.id}`);
      expect(crossKey.status).toBe(404);
    });
  });

  describe('one visibility rule for plain users (permissions.ts, confinedUserId)', () => {
    let venue: Awaited<ReturnType<typeof createVenue>>;
    let me: Awaited<ReturnType<typeof createUser>>;
    let colleague: Awaited<ReturnType<typeof createUser>>;
    let manager: Awaited<ReturnType<typeof createUser>>;
    const mine = `mine-${Date.now()}`;
    const theirs = `theirs-${Date.now()}`;
    beforeAll(async () => {
      venue = await createVenue(admin, 'Visibility venue');
      me = await createUser(admin, 'user');
      colleague = await createUser(admin, 'user');
      manager = await createUser(admin, 'user_manager');
      expect((await admin.post('/api/v1/devices', { identifier: mine, user_id: me.user.id })).status).toBe(201);
      expect((await admin.post('/api/v1/devices', { identifier: theirs, user_id: colleague.user.id })).status).toBe(201);
      const at = Date.now();
      const place = { building_id: venue.building.id, floor_id: venue.floors[0].id, x: 5, y: 5 };
      expect((await me.client.post('/api/v1/realtime/positions', { poses: [{ device_id: mine, timestamp: at, ...place }] })).status).toBe(
        204,
      );
      expect(
        (await colleague.client.post('/api/v1/realtime/positions', { poses: [{ device_id: theirs, timestamp: at, ...place }] })).status,
      ).toBe(204);
    });

    const ids = (response: { body: { features: { id: string }[] } }) =>
      response.body.features
        .map((feature) => feature.id)
        .filter((id) => id === mine || id === theirs)
        .sort();

    it('live positions: a user sees their own devices only, even when naming a colleague; managers see both', async () => {
      expect(ids(await me.client.get('/api/v1/realtime/positions'))).toEqual([mine]);
      expect(ids(await me.client.get(`/api/v1/realtime/positions?user_ids=${colleague.user.id}`))).toEqual([]);
      expect(ids(await me.client.get(`/api/v1/realtime/positions?device_ids=${theirs}`))).toEqual([]);
      const own = await me.client.get(`/api/v1/realtime/positions?building_ids=${venue.building.id}`);
      expect(own.body.devices_info.map((device: { id: string }) => device.id)).toEqual([mine]);
      expect(ids(await me.client.get(`/api/v1/real_time/building/${venue.building.id}`))).toEqual([mine]);
      expect(ids(await manager.client.get('/api/v1/realtime/positions'))).toEqual([mine, theirs].sort());
      expect(ids(await admin.get(`/api/v1/real_time/building/${venue.building.id}`))).toEqual([mine, theirs].sort());
    });

    it('history and its export: a user gets their own fixes only', async () => {
      const date = encodeURIComponent(`${new Date().toISOString().slice(0, 10)}T00:00:00.000+00:00`);
      const json = await me.client.get(`/api/v1/real_time/analytics/raw_pose_data?building_id=${venue.building.id}&date=${date}`);
      expect(json.status, json.text).toBe(200);
      expect([...new Set(json.body.analytics.map((row: { device_id: string }) => row.device_id))]).toEqual([mine]);
      const csv = await me.client.get(`/api/v1/real_time/export/${venue.building.id}?date=${date}`);
      expect(csv.status, csv.text).toBe(200);
      expect(csv.text).toContain(mine);
      expect(csv.text).not.toContain(theirs);
      expect((await manager.client.get(`/api/v1/real_time/export/${venue.building.id}?date=${date}`)).text).toContain(theirs);
    });

    it('alarms: a user lists and reads only alarms about themself, and sees operators by id, not e-mail', async () => {
      const about = (await me.client.post('/api/v1/alarms', { type: 'DANGER', device_id: mine, comment: 'help' })).body;
      const other = (await colleague.client.post('/api/v1/alarms', { type: 'ASSISTANCE_REQUEST', device_id: theirs })).body;
      expect(about.user_id).toBe(me.user.id);
      const handled = await manager.client.patch(`/api/v1/alarms/${about.id}`, { state: 'CONFIRMED', comment: 'on my way' });
      expect(handled.status, handled.text).toBe(200);
      const listed = await me.client.get('/api/v1/alarms?size=1000');
      expect(listed.body.data.map((alarm: { id: string }) => alarm.id)).toContain(about.id);
      expect(listed.body.data.every((alarm: { user_id: string }) => alarm.user_id === me.user.id)).toBe(true);
      expect((await me.client.get(`/api/v1/alarms?user_id=${colleague.user.id}`)).body.data).toEqual([]);
      expect((await me.client.get(`/api/v1/alarms/${other.id}`)).status).toBe(403);
      const read = await me.client.get(`/api/v1/alarms/${about.id}`);
      expect(read.body.history.map((entry: { by: unknown }) => entry.by)).toEqual([
        { user_id: me.user.id, email: me.email },
        { user_id: manager.user.id, email: null },
      ]);
      expect(JSON.stringify(listed.body)).not.toContain(manager.email);
      // Managers see the organization, e-mails included.
      expect((await manager.client.get(`/api/v1/alarms/${other.id}`)).status).toBe(200);
      expect((await manager.client.get(`/api/v1/alarms/${about.id}`)).body.history[1].by).toEqual({
        user_id: manager.user.id,
        email: manager.email,
      });
    });
  });

  describe('the platform administrator is changed only by itself', () => {
    it('another admin of its organization may not reset its password, edit it, or manage its API keys', async () => {
      const users = (await admin.get('/api/v1/users?size=1000')).body.data as { id: string; platform_admin: boolean }[];
      const platform = users.find((user) => user.platform_admin)!;
      const platformKey = (await admin.post('/api/v1/auth/apikeys', { permission: 'read-only' })).body;
      const other = await createUser(admin, 'admin');
      expect((await other.client.put(`/api/v1/users/${platform.id}`, { password: 'taken-over-1' })).status).toBe(403);
      expect((await other.client.patch(`/api/v1/users/${platform.id}`, { email: 'mine@example.test' })).status).toBe(403);
      expect((await other.client.patch(`/api/v1/users/${platform.id}`, { role: 'user' })).status).toBe(403);
      expect((await other.client.post('/api/v1/auth/apikeys', { permission: 'read-write', user_id: platform.id })).status).toBe(403);
      expect((await other.client.get(`/api/v1/auth/apikeys?user_id=${platform.id}`)).status).toBe(403);
      expect((await other.client.delete(`/api/v1/auth/apikeys/${platformKey.id}`)).status).toBe(403);
      // Nothing changed: the password still works and the key is still there.
      await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD);
      expect((await admin.get('/api/v1/auth/apikeys')).body.map((key: { id: string }) => key.id)).toContain(platformKey.id);
      // The platform administrator changes itself; other admins still manage each other.
      expect((await admin.patch(`/api/v1/users/${platform.id}`, { full_name: 'Platform' })).status).toBe(200);
      expect((await admin.delete(`/api/v1/auth/apikeys/${platformKey.id}`)).status).toBe(204);
      const colleague = await createUser(admin, 'admin');
      expect((await other.client.patch(`/api/v1/users/${colleague.user.id}`, { full_name: 'Renamed' })).status).toBe(200);
      expect((await other.client.post('/api/v1/auth/apikeys', { permission: 'read-only', user_id: colleague.user.id })).status).toBe(201);
    });
  });

  describe('alarm types raised by hand', () => {
    it('nobody raises a system type; a forged OPEN alarm therefore cannot absorb the real one', async () => {
      const member = await createUser(admin, 'user');
      const manager = await createUser(admin, 'user_manager');
      const device = `raiser-${Date.now()}`;
      expect((await admin.post('/api/v1/devices', { identifier: device, user_id: member.user.id })).status).toBe(201);
      for (const client of [member.client, manager.client, admin]) {
        for (const type of ['DEADMAN', 'GEOFENCE_MAX_STAY_TIME', 'BREACH', 'EMERGENCY', 'STATIONARY']) {
          const refused = await client.post('/api/v1/alarms', { type, device_id: device });
          expect(refused.status, `${type}: ${refused.text}`).toBe(403);
        }
      }
      expect((await admin.get(`/api/v1/alarms?device_id=${device}`)).body.data).toEqual([]);
      // The system's own alarm is then a new one, not a repeat of a forged one.
      const real = await running.gateway.services.alarms.raise({
        organizationId: member.user.organization_id,
        type: 'DEADMAN',
        deviceId: device,
        userId: member.user.id,
        details: { reason: 'still' },
        by: 'system',
      });
      expect(real.event.event).toBe('raised');
      expect(real.event.occurrences).toBe(1);
    });

    it('a user raises DANGER and ASSISTANCE_REQUEST about themself only', async () => {
      const member = await createUser(admin, 'user');
      const colleague = await createUser(admin, 'user');
      const own = `own-${Date.now()}`;
      const theirs = `their-${Date.now()}`;
      await admin.post('/api/v1/devices', { identifier: own, user_id: member.user.id });
      await admin.post('/api/v1/devices', { identifier: theirs, user_id: colleague.user.id });
      const danger = await member.client.post('/api/v1/alarms', { type: 'DANGER', device_id: own });
      expect(danger.status, danger.text).toBe(201);
      expect(danger.body.user_id).toBe(member.user.id);
      expect((await member.client.post('/api/v1/alarms', { type: 'ASSISTANCE_REQUEST' })).status).toBe(201);
      expect((await member.client.post('/api/v1/alarms', { type: 'DANGER', user_id: colleague.user.id })).status).toBe(403);
      expect((await member.client.post('/api/v1/alarms', { type: 'DANGER', device_id: theirs })).status).toBe(403);
      expect((await member.client.post('/api/v1/alarms', { type: 'DANGER', device_id: 'nobody-s-device' })).status).toBe(403);
      expect((await admin.get(`/api/v1/alarms?device_id=${theirs}`)).body.data).toEqual([]);
      // Operators still raise about anyone; an alarm about a device is about its owner, who then sees it.
      const raised = await admin.post('/api/v1/alarms', { type: 'DANGER', device_id: theirs });
      expect(raised.status).toBe(201);
      expect(raised.body.user_id).toBe(colleague.user.id);
      expect((await colleague.client.get(`/api/v1/alarms/${raised.body.id}`)).status).toBe(200);
    });
  });

  describe('event content', () => {
    it('an event’s url is an http(s) URL (422 otherwise); its HTML keeps only text styles and http(s) links', async () => {
      const venue = await createVenue(admin, 'Event venue');
      const event = (url: unknown, info = '') => ({
        building_id: venue.building.id,
        name: 'Promo',
        url,
        info,
        position: { floor_id: venue.floors[0].id, radius: 2, cartesians: { x: 1, y: 1 } },
      });
      for (const url of [
        'javascript:alert(1)',
        'data:text/html;base64,PHNjcmlwdD4=',
        'file:///etc/passwd',
        'vbscript:x',
        'example.test/no-scheme',
      ]) {
        const refused = await admin.post('/api/v1/events', event(url));
        expect(refused.status, url).toBe(422);
        expect(refused.body.errors.map((error: { field: string }) => error.field)).toEqual(['url']);
      }
      // One declaration per style: a ';' in a text field trips the embedded driver on serial-id inserts (reported separately).
      const html = '<p style="position: fixed">Hi <span style="color: red">there</span> <a href="data:text/html,x">x</a></p>';
      const created = await admin.post('/api/v1/events', event('https://example.test/promo', html));
      expect(created.status, created.text).toBe(201);
      expect(created.body.info).toBe('<p>Hi <span style="color:red">there</span> <a>x</a></p>');
      expect((await admin.put(`/api/v1/events/${created.body.id}`, { url: 'javascript:alert(1)' })).status).toBe(422);
      expect((await admin.put(`/api/v1/events/${created.body.id}`, { url: null })).status).toBe(200);
    });
  });
});
