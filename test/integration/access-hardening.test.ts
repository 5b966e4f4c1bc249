import SitumSDK from '@situm/sdk-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, type TestClient } from '../../testkit/http-client.js';
import { createVenue } from '../../testkit/cartography.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createApiKey, createOrganization, createUser, login } from '../../testkit/identity.js';
import { pngBytes, uploadImage } from '../../testkit/images.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

/** Issue 28 item 7: the open items of the earlier review on identity routes (L5, L6, L10, ...). */
describe(`access hardening (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
  });
  afterAll(async () => running?.stop());

  it('L5: sort=constructor or __proto__ is a 422 naming the sortable fields on users and devices, never a 500', async () => {
    for (const path of ['/api/v1/users', '/api/v1/devices']) {
      for (const sort of ['constructor', '__proto__', 'toString', 'hasOwnProperty,desc']) {
        const response = await admin.get(`${path}?sort=${encodeURIComponent(sort)}`);
        expect(response.status, `${path} sort=${sort}: ${response.text}`).toBe(422);
        expect(response.body).toMatchObject({ code: 'validation_failed', errors: [expect.objectContaining({ field: 'query.sort' })] });
      }
      expect((await admin.get(`${path}?sort=created_at,desc`)).status).toBe(200);
    }
  });

  it('L3: a page past the bound is a 422, not a query with an unsafe offset', async () => {
    expect((await admin.get(`/api/v1/users?page=${2 ** 53 - 1}`)).status).toBe(422);
    expect((await admin.get('/api/v1/users?page=1000000')).status).toBe(200);
  });

  it('L3: pois_bulk takes at most 1,000 POIs', async () => {
    const venue = await createVenue(admin, 'Bulk venue');
    const poi = (i: number) => ({
      building_id: venue.building.id,
      name: `Bulk ${i}`,
      position: { floor_id: venue.floors[0].id, x: 1, y: 1 },
    });
    const tooMany = await admin.post(
      '/api/v1/pois_bulk',
      Array.from({ length: 1001 }, (_, i) => poi(i)),
    );
    expect(tooMany.status).toBe(422);
    expect((await admin.get(`/api/v1/pois?building_id=${venue.building.id}`)).body).toHaveLength(0);
    const fits = await admin.post(
      '/api/v1/pois_bulk',
      Array.from({ length: 3 }, (_, i) => poi(i)),
    );
    expect(fits.status).toBe(201);
    expect(fits.body).toHaveLength(3);
  });

  it('L1: an admin of another organization cannot tell whether an e-mail is taken elsewhere; sign-in stays unambiguous', async () => {
    const other = await createOrganization(admin);
    const member = await createUser(admin, 'user');
    const create = (email: string, password: string) =>
      other.client.post('/api/v1/users', { email, password, role: 'user', full_name: 'Twin' });
    // An e-mail held in the first organization (its platform admin's, and a plain user's), and a fresh one:
    // the other organization's admin gets the same answer for all three: a new user of their own organization.
    const fresh = await create(`fresh-${Date.now()}@example.test`, 'twin-password-1');
    const taken = await create(ADMIN_EMAIL.toUpperCase(), 'twin-password-1');
    const takenToo = await create(member.email, member.password); // even with the same password
    for (const response of [fresh, taken, takenToo]) {
      expect(response.status, response.text).toBe(201);
      expect(Object.keys(response.body).sort()).toEqual(Object.keys(fresh.body).sort());
      expect(response.body.organization_id).toBe(other.organization.id);
      const read = await other.client.get(`/api/v1/users/${response.body.id}`);
      expect(read.body).toEqual(response.body);
    }
    expect(taken.body.email).toBe(ADMIN_EMAIL);
    // Within one organization an e-mail is still unique: that conflict names nothing outside it.
    const again = await create(ADMIN_EMAIL, 'another-password-1');
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('conflict');

    // Sign-in with the official client's flow (HTTP Basic e-mail:password): the password picks the account.
    const sdkAs = (username: string, password: string) => new SitumSDK({ domain: running.baseUrl, auth: { username, password } });
    const platform = sdkAs(ADMIN_EMAIL, ADMIN_PASSWORD);
    expect((await platform.cartography.getCurrentOrganization()).id).toBe(
      (await admin.get('/api/v1/organizations/current_organization')).body.id,
    );
    expect((await platform.authSession).payload).toMatchObject({ email: ADMIN_EMAIL, role: 'admin' });
    const twin = sdkAs(ADMIN_EMAIL, 'twin-password-1');
    expect((await twin.cartography.getCurrentOrganization()).id).toBe(other.organization.id);
    expect((await twin.authSession).payload).toMatchObject({ email: ADMIN_EMAIL, role: 'user', organization_uuid: other.organization.id });
    // One e-mail and one password opening two accounts: refused as ambiguous, naming no organization.
    const ambiguous = await running.client.post('/api/v1/auth/access_tokens', undefined, {
      authorization: basicAuth(member.email, member.password),
    });
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.body).toMatchObject({ code: 'ambiguous_credentials' });
    expect(ambiguous.text).not.toContain(other.organization.id);
    // Giving one of the two accounts its own password ends the ambiguity; an API key never is ambiguous.
    expect((await other.client.patch(`/api/v1/users/${takenToo.body.id}`, { password: 'own-password-1' })).status).toBe(200);
    expect(decodeOrg((await login(running.client, member.email, member.password)).access_token)).toBe(member.user.organization_id);
    expect(decodeOrg((await login(running.client, member.email, 'own-password-1')).access_token)).toBe(other.organization.id);
    const key = await createApiKey(member.client, 'read-only');
    expect(
      (await running.client.post('/api/v1/auth/access_tokens', undefined, { 'x-api-key': key, 'x-api-email': member.email })).status,
    ).toBe(200);
    // A wrong password for an e-mail held twice is the same 401 as for an unknown e-mail.
    const wrong = await running.client.post('/api/v1/auth/access_tokens', undefined, {
      authorization: basicAuth(member.email, 'wrong-password-1'),
    });
    const unknown = await running.client.post('/api/v1/auth/access_tokens', undefined, {
      authorization: basicAuth('nobody@example.test', 'wrong-password-1'),
    });
    expect([wrong.status, wrong.body]).toEqual([unknown.status, unknown.body]);
  });

  it('L3: floors, groups, POIs and POI categories come by pages when asked, and whole (as the official client reads them) otherwise', async () => {
    const org = await createOrganization(admin); // a fresh organization, so its lists hold only what this test makes
    const venue = await createVenue(org.client, 'Paged venue');
    const poi = (i: number) => ({
      building_id: venue.building.id,
      name: `Paged ${i}`,
      position: { floor_id: venue.floors[0].id, x: 1, y: 1 },
    });
    expect(
      (
        await org.client.post(
          '/api/v1/pois_bulk',
          Array.from({ length: 5 }, (_, i) => poi(i)),
        )
      ).status,
    ).toBe(201);
    for (let i = 0; i < 3; i += 1) {
      expect((await org.client.post('/api/v1/poi_categories', { name_en: `Category ${i}`, code: `c${i}` })).status).toBe(201);
      expect((await org.client.post('/api/v1/groups', { name: `Group ${i}` })).status).toBe(201);
    }
    const b = venue.building.id;
    const lists = [
      { path: `/api/v1/pois?building_id=${b}`, total: 5 },
      { path: `/api/v1/buildings/${b}/pois`, total: 5 },
      { path: `/api/v1/floors?building_id=${b}`, total: 2 },
      { path: `/api/v1/buildings/${b}/floors`, total: 2 },
      { path: '/api/v1/poi_categories', total: undefined }, // the platform's default categories, and these 3
      { path: '/api/v1/groups', total: 3 },
    ];
    for (const list of lists) {
      const { path } = list;
      const whole = await org.client.get(path);
      expect(whole.status, `${path}: ${whole.text}`).toBe(200);
      const total = list.total ?? whole.body.length;
      expect(whole.body, path).toHaveLength(total);
      expect(total, path).toBeGreaterThanOrEqual(2);
      const sep = path.includes('?') ? '&' : '?';
      const first = await org.client.get(`${path}${sep}size=2`);
      expect(first.status, `${path}: ${first.text}`).toBe(200);
      expect(first.body.metadata, path).toEqual({
        first: true,
        last: total <= 2,
        total_pages: Math.ceil(total / 2),
        total_elements: total,
        number_of_elements: 2,
        size: 2,
        number: 0,
      });
      const ids: unknown[] = [];
      for (let page = 0; page < first.body.metadata.total_pages; page += 1) {
        ids.push(...(await org.client.get(`${path}${sep}size=2&page=${page}`)).body.data.map((item: { id: unknown }) => item.id));
      }
      expect(ids, path).toEqual(whole.body.map((item: { id: unknown }) => item.id));
      expect((await org.client.get(`${path}${sep}size=1001`)).status, path).toBe(422);
    }
    expect(
      (await org.client.get(`/api/v1/pois?building_id=${b}&size=5&sort=name,desc`)).body.data.map((p: { name: string }) => p.name),
    ).toEqual(['Paged 4', 'Paged 3', 'Paged 2', 'Paged 1', 'Paged 0']);
  });

  it('L3: the bulk and whole-list bounds are settings: past them 422, with the way out named', async () => {
    const small = await startTestGateway({ POIS_BULK_MAX: '3', LIST_MAX_UNPAGED_ITEMS: '4' });
    try {
      const admin = await adminClient(small.client);
      const venue = await createVenue(admin, 'Small venue');
      const poi = (i: number) => ({
        building_id: venue.building.id,
        name: `Small ${i}`,
        position: { floor_id: venue.floors[0].id, x: 1, y: 1 },
      });
      const tooMany = await admin.post(
        '/api/v1/pois_bulk',
        Array.from({ length: 4 }, (_, i) => poi(i)),
      );
      expect(tooMany.status).toBe(422);
      expect(tooMany.text).toContain('3');
      expect(
        (
          await admin.post(
            '/api/v1/pois_bulk',
            Array.from({ length: 3 }, (_, i) => poi(i)),
          )
        ).status,
      ).toBe(201);
      expect((await admin.get(`/api/v1/pois?building_id=${venue.building.id}`)).body).toHaveLength(3);
      expect(
        (
          await admin.post(
            '/api/v1/pois_bulk',
            Array.from({ length: 2 }, (_, i) => poi(i + 3)),
          )
        ).status,
      ).toBe(201);
      for (const path of [`/api/v1/pois?building_id=${venue.building.id}`, `/api/v1/buildings/${venue.building.id}/pois`]) {
        const whole = await admin.get(path);
        expect(whole.status, path).toBe(422);
        expect(whole.body).toMatchObject({
          code: 'validation_failed',
          errors: [expect.objectContaining({ field: 'query.size', message: expect.stringContaining('LIST_MAX_UNPAGED_ITEMS') })],
        });
        const paged = await admin.get(`${path}${path.includes('?') ? '&' : '?'}size=100`);
        expect(paged.body.metadata.total_elements, path).toBe(5);
      }
    } finally {
      await small.stop();
    }
  });

  it('L6: presenting a used refresh token revokes the chain it rotated into', async () => {
    const user = await createUser(admin, 'user');
    const first = await login(running.client, user.email, user.password);
    const second = (await running.client.post('/api/v1/auth/refresh_access_tokens', first)).body;
    expect(second.refresh_token).toEqual(expect.any(String));
    // A stolen copy of the first refresh token is replayed.
    const replay = await running.client.post('/api/v1/auth/refresh_access_tokens', first);
    expect(replay.status).toBe(401);
    // The chain the owner (or thief) rotated into is now dead too.
    const rotated = await running.client.post('/api/v1/auth/refresh_access_tokens', second);
    expect(rotated.status).toBe(401);
    expect(rotated.body.code).toBe('invalid_credentials');
    // Another sign-in of the same user is a chain of its own, untouched.
    const other = await login(running.client, user.email, user.password);
    expect((await running.client.post('/api/v1/auth/refresh_access_tokens', other)).status).toBe(200);
  });

  it('NL3: sign-in outcomes, refusals and a refresh-token replay are in the audit log', async () => {
    const user = await createUser(admin, 'user');
    expect(
      (await running.client.post('/api/v1/auth/access_tokens', undefined, { authorization: basicAuth(user.email, 'wrong-password') }))
        .status,
    ).toBe(401);
    const tokens = await login(running.client, user.email, user.password);
    expect((await user.client.get('/api/v1/audit')).status).toBe(403);
    await running.client.post('/api/v1/auth/refresh_access_tokens', tokens);
    await running.client.post('/api/v1/auth/refresh_access_tokens', tokens);
    const page = await admin.get(`/api/v1/audit?object_type=security&user_id=${user.user.id}&size=50`);
    expect(page.status).toBe(200);
    const entries = page.body.data ?? page.body;
    const kinds = entries.map((entry: { object_id: string }) => entry.object_id).sort();
    // createUser signed in once, this test once more.
    expect(kinds).toEqual(['refresh-reuse', 'refused', 'sign-in', 'sign-in', 'sign-in-failed']);
    const refused = entries.find((entry: { object_id: string }) => entry.object_id === 'refused');
    expect(refused).toMatchObject({
      user_email: user.email,
      method: 'GET',
      route: '/api/v1/audit',
      after: { outcome: 'refused', detail: expect.stringContaining('role') },
    });
    expect(JSON.stringify(entries)).not.toContain('wrong-password');
  });

  it('NL4: an image declaring more than 16,384 pixels a side or 100 megapixels is refused with 422', async () => {
    /** A small valid PNG whose header declares another size (the server reads the header, as the browser would). */
    const declaring = (width: number, height: number) => {
      const bytes = Buffer.from(pngBytes(2, 2));
      bytes.writeUInt32BE(width, 16);
      bytes.writeUInt32BE(height, 20);
      return bytes;
    };
    for (const [width, height] of [
      [60_000, 60_000],
      [2_147_483_647, 2_147_483_647],
      [16_385, 10],
      [12_000, 12_000],
    ] as const) {
      const refused = await uploadImage(admin, declaring(width, height));
      expect(refused.status, `${width} x ${height}`).toBe(422);
      expect(refused.body.errors?.[0]?.message).toContain('megapixels');
    }
    const accepted = await uploadImage(admin, declaring(16_384, 6_000));
    expect(accepted.status).toBe(201);
    expect(accepted.body).toMatchObject({ width: 16_384, height: 6_000 });
  });

  it('L10: a user_manager cannot reset a peer user_manager’s password or e-mail, nor delete them; an admin can', async () => {
    const manager = await createUser(admin, 'user_manager');
    const peer = await createUser(admin, 'user_manager');
    const plain = await createUser(admin, 'user');
    for (const body of [{ password: 'taken-over-1' }, { email: `taken-${Date.now()}@example.test` }]) {
      const refused = await manager.client.patch(`/api/v1/users/${peer.user.id}`, body);
      expect(refused.status, JSON.stringify(body)).toBe(403);
    }
    expect((await manager.client.delete(`/api/v1/users/${peer.user.id}`)).status).toBe(403);
    // The peer's credentials are unchanged: the old password still signs in.
    await login(running.client, peer.email, peer.password);
    // Their own fields, and a plain user's credentials, stay the manager's to change.
    expect((await manager.client.patch(`/api/v1/users/${peer.user.id}`, { full_name: 'Renamed peer' })).status).toBe(200);
    expect((await manager.client.patch(`/api/v1/users/${plain.user.id}`, { password: 'reset-by-manager' })).status).toBe(200);
    await login(running.client, plain.email, 'reset-by-manager');
    expect((await manager.client.patch(`/api/v1/users/${manager.user.id}`, { password: 'my-own-new-one' })).status).toBe(200);
    expect((await admin.patch(`/api/v1/users/${peer.user.id}`, { password: 'reset-by-admin' })).status).toBe(200);
    await login(running.client, peer.email, 'reset-by-admin');
  });
});

describe(`cross-organization references (${driverLabel}, L2)`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  beforeAll(async () => {
    running = await startTestGateway();
    admin = await adminClient(running.client);
  });
  afterAll(async () => running?.stop());

  it('refuses another organization’s user in an alarm, and its images as a building picture or a category icon', async () => {
    const foreign = await createOrganization(admin);
    const foreignUser = await createUser(foreign.client, 'user');
    const foreignImage = (await uploadImage(foreign.client, pngBytes(2, 2))).body.id;
    const ownImage = (await uploadImage(admin, pngBytes(2, 2))).body.id;

    const danger = await admin.post('/api/v1/alarms', { type: 'DANGER', user_id: foreignUser.user.id });
    expect(danger.status).toBe(422);
    expect(danger.body.errors).toEqual([expect.objectContaining({ field: 'user_id' })]);

    const venue = await createVenue(admin, 'L2 venue');
    const picture = await admin.patch(`/api/v1/buildings/${venue.building.id}`, { picture_id: foreignImage });
    expect(picture.status).toBe(422);
    expect(picture.body.errors).toEqual([expect.objectContaining({ field: 'picture_id' })]);
    expect((await admin.get(`/api/v1/buildings/${venue.building.id}`)).body.picture_url).toBeNull();
    expect((await admin.patch(`/api/v1/buildings/${venue.building.id}`, { picture_id: ownImage })).body.picture_url).toContain(ownImage);

    const category = await admin.post('/api/v1/poi_categories', { name_en: 'L2', code: `l2-${Date.now()}`, icon: foreignImage });
    expect(category.status).toBe(422);
    expect(category.body.errors).toEqual([expect.objectContaining({ field: 'icon' })]);
    const own = await admin.post('/api/v1/poi_categories', { name_en: 'L2', code: `l2b-${Date.now()}`, icon: ownImage });
    expect(own.status).toBe(201);
    expect((await admin.patch(`/api/v1/poi_categories/${own.body.id}`, { selected_icon: foreignImage })).status).toBe(422);
  });
});

function decodeOrg(token: string): string {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).organization_uuid;
}
