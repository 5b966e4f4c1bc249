import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import type { TestClient } from '../../testkit/http-client.js';
import { adminClient, createApiKey, createUser, login } from '../../testkit/identity.js';
import { scrape } from '../../testkit/prometheus.js';
import { driverLabel } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

const TOKEN = 'metrics-token-for-quota-tests';
const PER_CREDENTIAL = 20; // the default
const FEED_BUFFER = 1024 * 1024; // the default WS_MAX_FEED_BUFFER_BYTES
const BACKLOG = 'floorcast_ws_backlog_bytes';

/** Opens `count` sockets at once; returns those opened and the statuses of those refused. */
async function openMany(baseUrl: string, count: number, headers: Record<string, string>) {
  const outcomes = await Promise.allSettled(Array.from({ length: count }, () => TestSocket.open(baseUrl, { headers })));
  const opened = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
  const refused = outcomes.flatMap((outcome) =>
    outcome.status === 'rejected' ? [(outcome.reason as { statusCode?: number }).statusCode] : [],
  );
  return { opened, refused };
}

/**
 * Issue 28 items 2 and 3 (NM2): sockets are bounded per user, per credential and per address, their upgrades
 * count against the request budget, and never-reading sockets cannot hold the gateway's memory.
 */
describe(`WebSocket quotas (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;
  let metricsUrl: string;
  let venue: Awaited<ReturnType<typeof createVenue>>;

  beforeAll(async () => {
    // The socket quotas are the defaults; the request budget is raised (the upgrade test starts its own gateway).
    running = await startTestGateway({
      METRICS_PORT: 'auto',
      METRICS_TOKEN: TOKEN,
      RATE_LIMIT_POSES_PER_SECOND: '1000000',
      RATE_LIMIT_POSES_BURST: '1000000',
      MAX_BODY_BYTES: String(8 * 1024 * 1024),
    });
    metricsUrl = `http://127.0.0.1:${running.gateway.metricsPort}/metrics`;
    admin = await adminClient(running.client);
    venue = await createVenue(admin, 'Quota venue');
    const fence = await admin.post('/api/v1/geofences', {
      name: 'Door',
      building_id: venue.building.id,
      floor_id: venue.floors[0].id,
      type: 'POLYGON',
      cartesians: squareCartesians(10, 10, 10),
    });
    expect(fence.status, fence.text).toBe(201);
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('24 never-reading sockets of one plain user: past the cap refused, and the backlog stays bounded', async () => {
    const user = await createUser(admin, 'user');
    const token = (await login(running.client, user.email, user.password)).access_token;
    const { opened, refused } = await openMany(running.baseUrl, 24, { authorization: `Bearer ${token}` });
    expect(opened.length).toBe(PER_CREDENTIAL);
    expect(refused).toEqual([429, 429, 429, 429]);
    for (const socket of opened)
      expect(await socket.request({ op: 'subscribe', topics: [`buildings/${venue.building.id}/geofence-events`] })).toMatchObject({
        op: 'subscribed',
      });
    for (const socket of opened) socket.ws.pause(); // never reads again
    const slowBefore = (await scrape(metricsUrl, TOKEN)).value('floorcast_ws_slow_consumer_disconnects_total');
    const start = Date.now() - 60_000;
    let peak = 0;
    for (let round = 0; round < 4; round++) {
      // In and out of the fence at every pose: an enter or exit event each.
      const poses = Array.from({ length: 10_000 }, (_, i) => ({
        device_id: `flood-${user.user.id}`,
        timestamp: start + round * 10_000 + i,
        building_id: venue.building.id,
        floor_id: venue.floors[0].id,
        x: i % 2 === 0 ? 15 : 40,
        y: 15,
      }));
      const upload = await user.client.post('/api/v1/realtime/positions', { poses });
      expect(upload.status, upload.text).toBe(204);
      peak = Math.max(peak, (await scrape(metricsUrl, TOKEN)).value(BACKLOG));
    }
    // Detection runs after the upload is acknowledged: sample until the events have all been pushed or refused.
    const deadline = Date.now() + 20_000;
    let previous = -1;
    while (Date.now() < deadline) {
      const backlog = (await scrape(metricsUrl, TOKEN)).value(BACKLOG);
      peak = Math.max(peak, backlog);
      if (backlog === previous && opened.every((socket) => socket.closeCode !== undefined || socket.ws.readyState !== socket.ws.OPEN))
        break;
      previous = backlog;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    // At most each socket's feed limit, plus one frame group it was writing when it passed it.
    expect(peak).toBeLessThanOrEqual(PER_CREDENTIAL * (FEED_BUFFER + 256 * 1024));
    for (const socket of opened) socket.ws.resume();
    await Promise.all(opened.map((socket) => socket.closed(20_000)));
    // Each was closed by the gateway as a slow consumer (its close frame stuck behind the backlog reads as 1006).
    for (const socket of opened) expect([4008, 1006]).toContain(socket.closeCode);
    expect((await scrape(metricsUrl, TOKEN)).value('floorcast_ws_slow_consumer_disconnects_total') - slowBefore).toBe(PER_CREDENTIAL);
    for (const socket of opened) socket.close();
  }, 180_000);

  it('a credential, a user over all their credentials, and the socket quota after closing: slots come back', async () => {
    const user = await createUser(admin, 'user');
    const key = await createApiKey(user.client, 'read-only');
    const viaKey = await openMany(running.baseUrl, PER_CREDENTIAL + 1, { 'x-api-key': key });
    expect(viaKey.opened.length).toBe(PER_CREDENTIAL);
    expect(viaKey.refused).toEqual([429]);
    // The same key in an `auth` message is refused too, with a 429 error frame; the socket stays unauthenticated.
    const late = await TestSocket.open(running.baseUrl);
    expect(await late.request({ op: 'auth', token: key })).toMatchObject({ op: 'error', status: 429, code: 'rate_limited' });
    // The user's password sessions are another credential, within the user's own cap (40 by default).
    const token = (await login(running.client, user.email, user.password)).access_token;
    const viaPassword = await openMany(running.baseUrl, PER_CREDENTIAL, { authorization: `Bearer ${token}` });
    expect(viaPassword.opened.length).toBe(PER_CREDENTIAL);
    const anotherKey = await createApiKey(user.client, 'read-only');
    const overUser = await openMany(running.baseUrl, 1, { 'x-api-key': anotherKey });
    expect(overUser.refused).toEqual([429]);
    // Closing one gives its slots back.
    viaKey.opened[0]!.close();
    await viaKey.opened[0]!.closed();
    expect(await late.request({ op: 'auth', token: key })).toMatchObject({ op: 'authenticated' });
    for (const socket of [...viaKey.opened, ...viaPassword.opened, late]) socket.close();
  }, 60_000);
});

describe(`WebSocket quota per address (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;

  beforeAll(async () => {
    running = await startTestGateway({ WS_MAX_SOCKETS_PER_ADDRESS: '5' });
    admin = await adminClient(running.client);
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('authenticated sockets of several users from one address stop at the address quota', async () => {
    const opened: TestSocket[] = [];
    const refused: (number | undefined)[] = [];
    for (let index = 0; index < 3; index++) {
      const user = await createUser(admin, 'user');
      const round = await openMany(running.baseUrl, 2, { 'x-api-key': await createApiKey(user.client, 'read-only') });
      opened.push(...round.opened);
      refused.push(...round.refused);
    }
    expect(opened.length).toBe(5);
    expect(refused).toEqual([429]);
    for (const socket of opened) socket.close();
  });
});

describe(`WebSocket upgrades against the request budget (${driverLabel})`, () => {
  let running: RunningGateway;
  let admin: TestClient;

  beforeAll(async () => {
    running = await startTestGateway({
      RATE_LIMIT_REQUESTS_PER_SECOND: '10',
      RATE_LIMIT_BURST: '0',
      WS_MAX_SOCKETS_PER_CREDENTIAL: '100',
      WS_MAX_SOCKETS_PER_USER: '100',
    });
    admin = await adminClient(running.client);
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('14 upgrades at once with a key whose budget is 10 per second: 10 open, 4 get 429, and REST is refused too', async () => {
    const user = await createUser(admin, 'user');
    const key = await createApiKey(user.client, 'read-only');
    const { opened, refused } = await openMany(running.baseUrl, 14, { 'x-api-key': key });
    const rest = await running.client.get('/api/v1/organizations/current_organization', { 'x-api-key': key });
    expect(opened.length).toBe(10);
    expect(refused).toEqual([429, 429, 429, 429]);
    expect(rest.status).toBe(429);
    for (const socket of opened) socket.close();
  });
});
