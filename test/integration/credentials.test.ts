import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenService, loadJwtSecret } from '../../gateway/auth/token-service.js';
import type { RouteDefinition } from '../../gateway/http/route.js';
import { basicAuth, type TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, createApiKey, createUser, login } from '../../testkit/identity.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';

const decode = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString());

/** Fills `:params` with a syntactically valid value; authorization is decided before the params are read. */
const concretePath = (route: RouteDefinition) => route.path.replace(/:[a-z_]+/g, '00000000-0000-4000-8000-000000000000');

describe(`credentials (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  beforeAll(async () => {
    running = await startTestGateway({ LOGIN_THROTTLE_MAX_FAILURES: '3', LOGIN_THROTTLE_WINDOW_SECONDS: '600' });
    admin = await adminClient(running.client);
  });
  afterAll(async () => running?.stop());

  it('issues a 4-day JWT with the claims the official client reads, for Basic email:password and an empty JSON body', async () => {
    const response = await running.client.request('POST', '/api/v1/auth/access_tokens', {
      raw: '',
      headers: {
        authorization: basicAuth(ADMIN_EMAIL.toUpperCase(), ADMIN_PASSWORD),
        'content-type': 'application/json',
        'content-length': '0',
      },
    });
    expect(response.status).toBe(200);
    expect(Object.keys(response.body).sort()).toEqual(['access_token', 'refresh_token']);
    const claims = decode(response.body.access_token);
    const organization = await admin.get('/api/v1/organizations/current_organization');
    expect(claims).toMatchObject({
      email: ADMIN_EMAIL,
      organization_uuid: organization.body.id,
      role: 'admin',
      api_permission: 'read-write',
    });
    expect(typeof claims.sub).toBe('string');
    expect(claims.exp - claims.iat).toBe(4 * 24 * 3600);
  });

  it('refuses a wrong password or an unknown e-mail with invalid_credentials', async () => {
    for (const [email, password] of [
      [ADMIN_EMAIL, 'wrong-password'],
      ['nobody@example.test', ADMIN_PASSWORD],
    ]) {
      const response = await running.client.post('/api/v1/auth/access_tokens', undefined, { authorization: basicAuth(email!, password!) });
      expect(response.status).toBe(401);
      expect(response.body).toMatchObject({ status: 401, code: 'invalid_credentials' });
    }
  });

  it('refuses a token request without credentials', async () => {
    const response = await running.client.post('/api/v1/auth/access_tokens');
    expect(response.status).toBe(401);
  });

  it('issues tokens for an API key sent alone (as the official client does) or with its owner’s e-mail', async () => {
    const key = await createApiKey(admin, 'read-only');
    const alone = await running.client.post('/api/v1/auth/access_tokens', undefined, { 'x-api-key': key });
    expect(alone.status).toBe(200);
    expect(decode(alone.body.access_token)).toMatchObject({ email: ADMIN_EMAIL, api_permission: 'read-only' });
    const withEmail = await running.client.post('/api/v1/auth/access_tokens', undefined, { 'x-api-key': key, 'x-api-email': ADMIN_EMAIL });
    expect(withEmail.status).toBe(200);
    const wrongEmail = await running.client.post('/api/v1/auth/access_tokens', undefined, {
      'x-api-key': key,
      'x-api-email': 'other@example.test',
    });
    expect(wrongEmail.status).toBe(401);
    const unknown = await running.client.post('/api/v1/auth/access_tokens', undefined, { 'x-api-key': 'fc_not-a-real-key' });
    expect(unknown.status).toBe(401);
  });

  it('accepts X-API-EMAIL + X-API-KEY on every /api/v1 request', async () => {
    const key = await createApiKey(admin, 'read-write');
    const response = await running.client.get('/api/v1/organizations/current_organization', {
      'x-api-email': ADMIN_EMAIL,
      'x-api-key': key,
    });
    expect(response.status).toBe(200);
    const wrong = await running.client.get('/api/v1/organizations/current_organization', { 'x-api-email': 'x@y.z', 'x-api-key': key });
    expect(wrong.status).toBe(401);
  });

  it('refuses an expired token with token_expired and a forged one with 401', async () => {
    const config = running.gateway.services.config;
    const past = new TokenService(loadJwtSecret(config), 60, () => Date.now() - 3600_000);
    const me = decode((await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token);
    const expired = await past.sign({
      sub: me.sub,
      email: me.email,
      organization_uuid: me.organization_uuid,
      role: 'admin',
      api_permission: 'read-write',
    });
    const response = await running.client.withToken(expired).get('/api/v1/version');
    expect(response.status).toBe(401);
    expect(response.body.code).toBe('token_expired');
    const forger = new TokenService(new TextEncoder().encode('x'.repeat(48)), 3600);
    const forged = await forger.sign({
      sub: me.sub,
      email: me.email,
      organization_uuid: me.organization_uuid,
      role: 'admin',
      api_permission: 'read-write',
    });
    expect((await running.client.withToken(forged).get('/api/v1/version')).status).toBe(401);
    expect((await running.client.withHeaders({ authorization: 'Bearer garbage' }).get('/api/v1/version')).status).toBe(401);
  });

  it('rotates refresh tokens: the new pair works, the old refresh token is used up, and its replay ends the chain', async () => {
    const first = await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD);
    const refreshed = await running.client.post('/api/v1/auth/refresh_access_tokens', first);
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.refresh_token).not.toBe(first.refresh_token);
    expect((await running.client.withToken(refreshed.body.access_token).get('/api/v1/version')).status).toBe(200);
    const again = await running.client.post('/api/v1/auth/refresh_access_tokens', refreshed.body);
    expect(again.status).toBe(200);
    const replay = await running.client.post('/api/v1/auth/refresh_access_tokens', first);
    expect(replay.status).toBe(401);
    // A used token presented again is taken as stolen: the chain it rotated into is revoked (L6).
    expect((await running.client.post('/api/v1/auth/refresh_access_tokens', again.body)).status).toBe(401);
  });

  it('refuses a refresh token presented with another user’s access token', async () => {
    const other = await createUser(admin, 'user');
    const mine = await login(running.client, ADMIN_EMAIL, ADMIN_PASSWORD);
    const theirs = await login(running.client, other.email, other.password);
    const response = await running.client.post('/api/v1/auth/refresh_access_tokens', {
      access_token: theirs.access_token,
      refresh_token: mine.refresh_token,
    });
    expect(response.status).toBe(401);
  });

  it('keeps a refreshed API-key session at the key’s permission', async () => {
    const key = await createApiKey(admin, 'read-only');
    const tokens = (await running.client.post('/api/v1/auth/access_tokens', undefined, { 'x-api-key': key })).body;
    const refreshed = await running.client.post('/api/v1/auth/refresh_access_tokens', tokens);
    expect(decode(refreshed.body.access_token).api_permission).toBe('read-only');
  });

  it('throttles an account after repeated failures, even for the right password, with Retry-After', async () => {
    const victim = await createUser(admin, 'user');
    for (let i = 0; i < 3; i++) {
      const failed = await running.client.post('/api/v1/auth/access_tokens', undefined, {
        authorization: basicAuth(victim.email, 'nope-nope'),
      });
      expect(failed.status).toBe(401);
    }
    const blocked = await running.client.post('/api/v1/auth/access_tokens', undefined, {
      authorization: basicAuth(victim.email, victim.password),
    });
    expect(blocked.status).toBe(429);
    expect(blocked.body.code).toBe('rate_limited');
    const retryAfter = Number(blocked.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(600);
    // Another account is not affected.
    expect(
      (await running.client.post('/api/v1/auth/access_tokens', undefined, { authorization: basicAuth(ADMIN_EMAIL, ADMIN_PASSWORD) }))
        .status,
    ).toBe(200);
  });

  it('counts each of N parallel wrong attempts before checking the password: only the budget gets a guess', async () => {
    const victim = await createUser(admin, 'user');
    const attempts = await Promise.all(
      Array.from({ length: 12 }, () =>
        running.client.post('/api/v1/auth/access_tokens', undefined, { authorization: basicAuth(victim.email, 'guess-guess') }),
      ),
    );
    const statuses = attempts.map((response) => response.status);
    expect(statuses.filter((status) => status === 401)).toHaveLength(3);
    expect(statuses.filter((status) => status === 429)).toHaveLength(9);
    const blocked = await running.client.post('/api/v1/auth/access_tokens', undefined, {
      authorization: basicAuth(victim.email, victim.password),
    });
    expect(blocked.status).toBe(429);
  });

  it('lists API keys masked, shows a key once, filters by permission, and revokes', async () => {
    const created = await admin.post('/api/v1/auth/apikeys', { permission: 'positioning', description: 'tracker app' });
    expect(created.status).toBe(201);
    expect(created.body.apikey).toMatch(/^fc_[A-Za-z0-9_-]{32}$/);
    const list = await admin.get('/api/v1/auth/apikeys?permissions=positioning');
    expect(list.status).toBe(200);
    const listed = list.body.find((key: { id: string }) => key.id === created.body.id);
    expect(listed).toMatchObject({ permission: 'positioning', description: 'tracker app' });
    expect(listed.apikey).not.toBe(created.body.apikey);
    expect(listed.apikey).toContain('…');
    expect(list.body.every((key: { permission: string }) => key.permission === 'positioning')).toBe(true);
    expect(Object.keys(listed).sort()).toEqual([
      'apikey',
      'created_at',
      'description',
      'id',
      'last_used_at',
      'permission',
      'poses_per_second',
      'requests_per_second',
      'user_id',
    ]);
    const revoked = await admin.delete(`/api/v1/auth/apikeys/${created.body.id}`);
    expect(revoked.status).toBe(204);
    const afterRevoke = await running.client.post('/api/v1/auth/access_tokens', undefined, { 'x-api-key': created.body.apikey });
    expect(afterRevoke.status).toBe(401);
  });

  it('stops a revoked key at once, even one this gateway had cached', async () => {
    const key = await admin.post('/api/v1/auth/apikeys', { permission: 'read-write' });
    const headers = { 'x-api-key': key.body.apikey };
    expect((await running.client.get('/api/v1/version', headers)).status).toBe(200);
    await admin.delete(`/api/v1/auth/apikeys/${key.body.id}`);
    expect((await running.client.get('/api/v1/version', headers)).status).toBe(401);
  });

  it('answers 403 to a read-only credential on every write route', async () => {
    const key = await createApiKey(admin, 'read-only');
    const viaKey = running.client.withHeaders({ 'x-api-key': key });
    const viaToken = running.client.withToken(
      (await running.client.post('/api/v1/auth/access_tokens', undefined, { 'x-api-key': key })).body.access_token,
    );
    const writes = running.gateway.routes.filter((route) => route.auth !== 'public' && route.method !== 'GET');
    expect(writes.length).toBeGreaterThan(10);
    for (const route of writes) {
      for (const client of [viaKey, viaToken]) {
        const response = await client.request(route.method, concretePath(route), { body: {} });
        expect(response.status, `${route.method} ${route.path}`).toBe(403);
        expect(response.body.code).toBe('forbidden');
      }
    }
    expect((await viaKey.get('/api/v1/organizations/current_organization')).status).toBe(200);
  });

  it('answers 403 to a positioning key on every route but position uploads', async () => {
    const key = await createApiKey(admin, 'positioning');
    const client = running.client.withHeaders({ 'x-api-key': key });
    const others = running.gateway.routes.filter((route) => route.auth !== 'public' && !route.allowPositioningKey);
    for (const route of others) {
      const response = await client.request(
        route.method,
        concretePath(route),
        route.method === 'GET' || route.method === 'DELETE' ? {} : { body: {} },
      );
      expect(response.status, `${route.method} ${route.path}`).toBe(403);
    }
  });

  it('refuses every authenticated route without credentials', async () => {
    for (const route of running.gateway.routes.filter((r) => r.auth !== 'public')) {
      const response = await running.client.request(
        route.method,
        concretePath(route),
        route.method === 'GET' || route.method === 'DELETE' ? {} : { body: {} },
      );
      expect(response.status, `${route.method} ${route.path}`).toBe(401);
    }
  });

  it('stops the tokens of a deleted user at once', async () => {
    const doomed = await createUser(admin, 'user');
    expect((await doomed.client.get('/api/v1/version')).status).toBe(200);
    expect((await admin.delete(`/api/v1/users/${doomed.user.id}`)).status).toBe(204);
    expect((await doomed.client.get('/api/v1/version')).status).toBe(401);
  });
});

describe(`login throttle per client address (${driverLabel})`, () => {
  let running: RunningGateway;
  beforeAll(async () => {
    running = await startTestGateway({
      LOGIN_THROTTLE_MAX_FAILURES: '3',
      LOGIN_THROTTLE_MAX_FAILURES_PER_ADDRESS: '4',
      LOGIN_THROTTLE_WINDOW_SECONDS: '600',
    });
  });
  afterAll(async () => running?.stop());

  it('stops one address trying many accounts, whatever the account', async () => {
    for (let i = 0; i < 4; i++) {
      const failed = await running.client.post('/api/v1/auth/access_tokens', undefined, {
        authorization: basicAuth(`sprayed-${i}@example.test`, 'guess-guess'),
      });
      expect(failed.status).toBe(401);
    }
    const blocked = await running.client.post('/api/v1/auth/access_tokens', undefined, {
      authorization: basicAuth(ADMIN_EMAIL, ADMIN_PASSWORD),
    });
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
