import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiKeyPermission } from '../../shared/storage/entities/index.js';
import { UserSchema } from '../../shared/storage/entities/index.js';
import { createVenue } from '../../testkit/cartography.js';
import type { TestClient, TestResponse } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, createUser } from '../../testkit/identity.js';
import { driverLabel, serverDatabaseUrl, serverRedisUrl } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

const PROBE = '/api/v1/organizations/current_organization';

/** A key of the first administrator made in-process, so setting tests up spends nobody's budget. */
async function directKey(
  running: RunningGateway,
  permission: ApiKeyPermission,
  limits: { requestsPerSecond?: number; posesPerSecond?: number } = {},
) {
  const { storage, credentials } = running.gateway.services;
  const owner = await storage.em().findOneOrFail(UserSchema, { email: ADMIN_EMAIL }, { populate: ['organization'] });
  return (await credentials.createApiKey(owner, permission, 'rate-limit test', limits)).key;
}

const burst = (client: TestClient, count: number, send: (client: TestClient) => Promise<TestResponse> = (c) => c.get(PROBE)) =>
  Promise.all(Array.from({ length: count }, () => send(client)));

/** Retries until the budget lets a request through (refill), waiting Retry-After between tries; generous deadline. */
async function eventually(send: () => Promise<TestResponse>, deadlineMs = 15_000): Promise<TestResponse> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const response = await send();
    if (response.status !== 429 || Date.now() > deadline) return response;
    await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('retry-after') ?? 1) * 1000));
  }
}

describe(`per-credential rate limits (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  beforeAll(async () => {
    running = await startTestGateway({
      RATE_LIMIT_REQUESTS_PER_SECOND: '4',
      RATE_LIMIT_BURST: '0',
      RATE_LIMIT_POSES_PER_SECOND: '5',
      RATE_LIMIT_POSES_BURST: '0',
    });
    admin = running.client.withHeaders({
      'x-api-key': await directKey(running, 'read-write', { requestsPerSecond: 1000, posesPerSecond: 1000 }),
    });
  });
  afterAll(async () => running?.stop());

  it('answers a burst over budget with 429 rate_limited, Retry-After and the RateLimit headers, and refills', async () => {
    const client = running.client.withHeaders({ 'x-api-key': await directKey(running, 'read-only') });
    const responses = await burst(client, 16);
    const ok = responses.filter((r) => r.status === 200);
    const limited = responses.filter((r) => r.status === 429);
    expect(ok.length).toBeGreaterThan(0);
    expect(limited.length).toBeGreaterThan(0);
    expect(ok[0]!.headers.get('ratelimit-policy')).toBe('"requests";q=4;w=1');
    expect(ok[0]!.headers.get('ratelimit')).toMatch(/^"requests";r=\d+;t=[01]$/);
    const refused = limited[0]!;
    expect(refused.body).toMatchObject({ status: 429, code: 'rate_limited' });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.headers.get('ratelimit')).toMatch(/^"requests";r=0;t=\d+$/);
    expect(refused.headers.get('ratelimit-policy')).toBe('"requests";q=4;w=1');
    expect(refused.headers.get('access-control-expose-headers')).toContain('RateLimit-Policy');
    expect((await eventually(() => client.get(PROBE))).status).toBe(200);
  });

  it('gives every user a budget of their own for their password tokens', async () => {
    const user = await createUser(admin, 'user');
    const statuses = (await burst(user.client, 16)).map((r) => r.status);
    expect(statuses).toContain(429);
    // Someone else's budget is untouched.
    expect((await admin.get(PROBE)).status).toBe(200);
  });

  it('lets an API key override the deployment’s budget, up or down, and shows it', async () => {
    const slow = await admin.post('/api/v1/auth/apikeys', { permission: 'read-only', requests_per_second: 1 });
    expect(slow.status).toBe(201);
    expect(slow.body).toMatchObject({ requests_per_second: 1, poses_per_second: null });
    const slowClient = running.client.withHeaders({ 'x-api-key': slow.body.apikey });
    const slowStatuses = (await burst(slowClient, 6)).map((r) => r.status);
    expect(slowStatuses.filter((s) => s === 200).length).toBeLessThanOrEqual(2);
    const fast = await admin.post('/api/v1/auth/apikeys', { permission: 'read-only', requests_per_second: 500 });
    const fastClient = running.client.withHeaders({ 'x-api-key': fast.body.apikey });
    expect((await burst(fastClient, 16)).map((r) => r.status)).toEqual(Array(16).fill(200));
    // A token minted from a key spends that key's budget.
    const token = (await running.client.post('/api/v1/auth/access_tokens', undefined, { 'x-api-key': slow.body.apikey })).body.access_token;
    expect((await burst(running.client.withToken(token), 6)).map((r) => r.status)).toContain(429);
    expect((await admin.post('/api/v1/auth/apikeys', { requests_per_second: 0 })).status).toBe(422);
  });

  it('counts uploaded positions per pose, over HTTP and WebSocket alike', async () => {
    const venue = await createVenue(admin, 'Budget venue');
    const pose = (i: number) => ({
      device_id: `budget-${i}`,
      timestamp: Date.now(),
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      x: 5,
      y: 5,
    });
    const key = await directKey(running, 'positioning');
    const tracker = running.client.withHeaders({ 'x-api-key': key });
    const tooMany = await tracker.post('/api/v1/realtime/positions', { poses: Array.from({ length: 6 }, (_, i) => pose(i)) });
    expect(tooMany.status).toBe(429);
    expect(tooMany.headers.get('ratelimit-policy')).toContain('"poses";q=5;w=1');
    const fits = await eventually(() => tracker.post('/api/v1/realtime/positions', { poses: [pose(1), pose(2)] }));
    expect(fits.status).toBe(204);
    expect(fits.headers.get('ratelimit-policy')).toBe('"requests";q=4;w=1, "poses";q=5;w=1');
    expect(fits.headers.get('ratelimit')).toMatch(/^"requests";r=\d+;t=\d+, "poses";r=3;t=\d+$/);

    const socket = await TestSocket.open(running.baseUrl, { headers: { 'x-api-key': key } });
    try {
      await socket.next((frame) => frame.op === 'authenticated');
      const refused = await socket.request({ op: 'upload', poses: Array.from({ length: 6 }, (_, i) => pose(i)) });
      expect(refused).toMatchObject({ op: 'error', status: 429, code: 'rate_limited' });
    } finally {
      socket.close();
    }
  });
});

describe.runIf(serverDatabaseUrl && serverRedisUrl)(`rate limits shared across gateways (${driverLabel})`, () => {
  it('spends one budget whichever gateway a credential calls', async () => {
    // 1 request per second plus a burst of 20 that takes 20 s to refill: two gateways with budgets of their
    // own would let about 42 of these 60 requests through, one shared budget about 21.
    const first = await startTestGateway({ RATE_LIMIT_REQUESTS_PER_SECOND: '1', RATE_LIMIT_BURST: '20' });
    const second = await startTestGateway({}, {}, first.environment);
    try {
      const key = await directKey(first, 'read-only');
      const onFirst = await burst(first.client.withHeaders({ 'x-api-key': key }), 30);
      const onSecond = await burst(second.client.withHeaders({ 'x-api-key': key }), 30);
      const passed = [...onFirst, ...onSecond].filter((r) => r.status === 200).length;
      expect(onFirst.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(21);
      expect(passed).toBeLessThan(32);
      expect(onSecond.some((r) => r.status === 429)).toBe(true);
    } finally {
      await second.gateway.close();
      await first.stop();
    }
  });
});

describe(`who sets budgets, and how many keys (${driverLabel}, issue 28 item 2)`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  beforeAll(async () => {
    running = await startTestGateway({
      MAX_API_KEYS_PER_USER: '3',
      RATE_LIMIT_MAX_REQUESTS_PER_SECOND: '50',
      RATE_LIMIT_MAX_POSES_PER_SECOND: '500',
    });
    admin = running.client.withHeaders({ 'x-api-key': await directKey(running, 'read-write') });
  });
  afterAll(async () => running?.stop());

  it('refuses a plain user’s own rates (403) and an admin’s past the maximum (422), and keeps an allowed one', async () => {
    const user = await createUser(admin, 'user');
    const selfRaised = await user.client.post('/api/v1/auth/apikeys', { permission: 'read-only', requests_per_second: 10 });
    expect(selfRaised.status).toBe(403);
    expect((await user.client.post('/api/v1/auth/apikeys', { permission: 'read-only', requests_per_second: 2147483647 })).status).toBe(422);
    for (const body of [{ requests_per_second: 51 }, { requests_per_second: 3_000_000_000 }, { poses_per_second: 501 }]) {
      const refused = await admin.post('/api/v1/auth/apikeys', { permission: 'read-only', user_id: user.user.id, ...body });
      expect(refused.status, JSON.stringify(body)).toBe(422);
      expect(refused.body).toMatchObject({ status: 422, code: 'validation_failed' });
    }
    const granted = await admin.post('/api/v1/auth/apikeys', {
      permission: 'read-only',
      user_id: user.user.id,
      requests_per_second: 50,
      poses_per_second: 500,
    });
    expect(granted.status).toBe(201);
    const listed = (await user.client.get('/api/v1/auth/apikeys')).body;
    expect(listed).toEqual([expect.objectContaining({ id: granted.body.id, requests_per_second: 50, poses_per_second: 500 })]);
  });

  it('caps the keys one user holds; deleting one makes room again', async () => {
    const user = await createUser(admin, 'user');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const made = await user.client.post('/api/v1/auth/apikeys', { permission: 'read-only' });
      expect(made.status).toBe(201);
      ids.push(made.body.id);
    }
    const fourth = await user.client.post('/api/v1/auth/apikeys', { permission: 'read-only' });
    expect(fourth.status).toBe(422);
    expect(fourth.body.errors?.[0]?.message).toMatch(/at most 3/);
    // An admin cannot add one for them either.
    expect((await admin.post('/api/v1/auth/apikeys', { permission: 'read-only', user_id: user.user.id })).status).toBe(422);
    expect((await user.client.get('/api/v1/auth/apikeys')).body).toHaveLength(3);
    expect((await user.client.delete(`/api/v1/auth/apikeys/${ids[0]}`)).status).toBe(204);
    expect((await user.client.post('/api/v1/auth/apikeys', { permission: 'read-only' })).status).toBe(201);
  });

  it('counts a user’s keys and tokens together against the per-user budget', async () => {
    const aggregated = await startTestGateway({
      RATE_LIMIT_REQUESTS_PER_SECOND: '10',
      RATE_LIMIT_BURST: '0',
      RATE_LIMIT_USER_REQUESTS_PER_SECOND: '3',
    });
    try {
      const first = aggregated.client.withHeaders({ 'x-api-key': await directKey(aggregated, 'read-only') });
      const second = aggregated.client.withHeaders({ 'x-api-key': await directKey(aggregated, 'read-only') });
      // 3 a second plus a burst of 6 for the user, whichever key: of 20 requests over two keys, at most 9 pass.
      const responses = [...(await burst(first, 10)), ...(await burst(second, 10))];
      expect(responses.filter((r) => r.status === 200).length).toBeLessThanOrEqual(9);
      expect(responses.find((r) => r.status === 429)?.body.message).toMatch(/this user's requests/);
    } finally {
      await aggregated.stop();
    }
  });
});
