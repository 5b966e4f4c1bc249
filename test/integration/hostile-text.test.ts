import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue } from '../../testkit/cartography.js';
import { basicAuth, type TestClient } from '../../testkit/http-client.js';
import { adminClient, createUser } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/**
 * The reproductions of review NC1 through the API: on embedded storage a `;` in any value once made the query
 * layer read nested results, so writes answered 404/500 and stored nothing, filters answered 500, and a
 * device's owner was read as "none".
 */
describe(`values holding ; and other SQL punctuation, through the API (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;

  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
  });
  afterAll(async () => running?.stop());

  it('stores a building named "Ward 3; east" (201) and reads it back', async () => {
    const created = await admin.post('/api/v1/buildings', {
      name: 'Ward 3; east',
      description: "it's -- /* a */ ?; $1 &quot;",
      location: { lat: 40.4, lng: -3.7 },
      dimensions: { width: 50, length: 30 },
    });
    expect(created.status, created.text).toBe(201);
    const read = await admin.get(`/api/v1/buildings/${created.body.id}`);
    expect(read.status, read.text).toBe(200);
    expect(read.body).toMatchObject({ name: 'Ward 3; east', description: "it's -- /* a */ ?; $1 &quot;" });
  });

  it('stores a DANGER alarm commented "fire; second floor" (201) and reads it back', async () => {
    const raised = await admin.post('/api/v1/alarms', { type: 'DANGER', comment: 'fire; second floor' });
    expect(raised.status, raised.text).toBe(201);
    const read = await admin.get(`/api/v1/alarms/${raised.body.id}`);
    expect(read.status, read.text).toBe(200);
    expect(read.body.history.map((entry: { comment: string | null }) => entry.comment)).toContain('fire; second floor');
    expect((await admin.get('/api/v1/alarms?type=DANGER')).body.data.map((alarm: { id: string }) => alarm.id)).toContain(raised.body.id);
  });

  it('refuses a custom field value that is not a string (422) instead of storing "[object Object]", on buildings and POIs', async () => {
    const venue = await createVenue(admin, 'Custom fields venue');
    for (const value of [{ nested: 'object' }, ['a'], 5, true, null]) {
      const building = await admin.post('/api/v1/buildings', {
        name: 'Custom',
        location: { lat: 40.4, lng: -3.7 },
        dimensions: { width: 50, length: 30 },
        custom_fields: [{ key: 'k', value }],
      });
      expect(building.status, `${JSON.stringify(value)}: ${building.text}`).toBe(422);
      expect(building.body.errors[0].field).toBe('custom_fields.0.value');
      const poi = await admin.post('/api/v1/pois', {
        building_id: venue.building.id,
        name: 'Lift',
        position: { floor_id: venue.floors[0].id, x: 5, y: 5 },
        custom_fields: [{ key: 'k', value }],
      });
      expect(poi.status, `${JSON.stringify(value)}: ${poi.text}`).toBe(422);
    }
    const fields = [{ key: 'wing; east', value: '{"a":1}; -- it\'s' }];
    const poi = await admin.post('/api/v1/pois', {
      building_id: venue.building.id,
      name: 'Lift',
      position: { floor_id: venue.floors[0].id, x: 5, y: 5 },
      custom_fields: fields,
    });
    expect(poi.status, poi.text).toBe(201);
    expect((await admin.get(`/api/v1/pois/${poi.body.id}`)).body.custom_fields).toEqual(fields);
  });

  it('answers a sign-in as a;b@x.test with 401, not 500', async () => {
    const response = await running.client.post('/api/v1/auth/access_tokens', undefined, {
      authorization: basicAuth('a;b@x.test', 'wrong; password'),
    });
    expect(response.status, response.text).toBe(401);
    expect(response.body).toMatchObject({ status: 401 });
  });

  it.each([
    '/api/v1/users?full_name=a;b',
    '/api/v1/alarms?device_id=a;b',
    '/api/v1/audit?object_id=a;b',
    "/api/v1/users?full_name=x'%3B--",
    '/api/v1/alarms?device_id=%3F%241%2F*',
  ])('answers the filter %s with 2xx', async (path) => {
    const response = await admin.get(path);
    expect(response.status, response.text).toBe(200);
    expect(response.body.data).toEqual([]);
  });

  it("refuses a plain user's upload for a colleague's device (403), also beside a device named x;abc, and leaves it where it was", async () => {
    const venue = await createVenue(admin, 'Owner check venue');
    const me = await createUser(admin, 'user');
    const colleague = await createUser(admin, 'user');
    const phone = `colleague-phone-${Date.now()}`;
    // Creating the device announces a change: the directory forgets the organization's devices and reads them again.
    expect((await admin.post('/api/v1/devices', { identifier: phone, user_id: colleague.user.id })).status).toBe(201);
    const place = { building_id: venue.building.id, floor_id: venue.floors[0].id };
    const theirs = await colleague.client.post('/api/v1/realtime/positions', {
      poses: [{ device_id: phone, timestamp: Date.now() - 2000, ...place, x: 5, y: 5 }],
    });
    expect(theirs.status, theirs.text).toBe(204);
    expect((await admin.post('/api/v1/devices', { identifier: `other-${Date.now()}` })).status).toBe(201);
    const attack = await me.client.post('/api/v1/realtime/positions', {
      poses: [
        { device_id: phone, timestamp: Date.now() - 1000, ...place, x: 60, y: 40 },
        { device_id: 'x;abc', timestamp: Date.now() - 1000, ...place, x: 60, y: 40 },
      ],
    });
    expect(attack.status, attack.text).toBe(403);
    const live = await admin.get(`/api/v1/realtime/positions?device_ids=${encodeURIComponent(phone)}`);
    expect(live.status, live.text).toBe(200);
    const feature = live.body.features.find((candidate: { id: string }) => candidate.id === phone);
    expect(feature?.properties).toMatchObject({ user_id: colleague.user.id, local_coordinates: [5, 5] });
  });
});
