import { afterAll, beforeAll, expect } from 'vitest';
import { createVenue, squareCartesians } from '../../testkit/cartography.js';
import { FaultRedis } from '../../testkit/fault-servers.js';
import type { TestClient } from '../../testkit/http-client.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, adminClient, login } from '../../testkit/identity.js';
import { createTestEnvironment, type TestEnvironment } from '../../testkit/test-environment.js';
import { startTestGateway, type RunningGateway } from '../../testkit/test-gateway.js';
import { TestSocket } from '../../testkit/ws-client.js';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Fast heartbeats so a test sees joins, leaves and takeovers within a second or two. */
export const FAST_CLUSTER = { CLUSTER_HEARTBEAT_MS: '200', CLUSTER_MEMBER_TTL_MS: '1000', CLUSTER_SHARDS: '16' };

export interface TestCluster {
  environment: TestEnvironment;
  gateways: RunningGateway[];
  admins: TestClient[];
  token: string;
  sockets: TestSocket[];
  /** A socket on gateway `index`, subscribed to `topics`. */
  subscribe(index: number, topics: string[]): Promise<TestSocket>;
  /** Uploads through gateway `index`; asserts the 204. */
  upload(index: number, ...poses: object[]): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Registers the suite's hooks: `count` gateways, converged, on a Redis of their own that the tests may stop and
 * restart (FaultRedis), stopped and removed after the suite. The handle is filled once the suite starts.
 */
export function clusterOnPrivateRedis(count: number): { redis: FaultRedis; cluster: TestCluster } {
  const handle = {} as { redis: FaultRedis; cluster: TestCluster };
  beforeAll(async () => {
    handle.redis = await FaultRedis.start();
    handle.cluster = await startCluster(count, { REDIS_URL: handle.redis.url });
    await converged(handle.cluster.gateways);
  }, 60_000);
  afterAll(async () => {
    await handle.cluster?.stop();
    await handle.redis?.destroy();
  });
  return handle;
}

/** `count` gateways in this process on one database and one Redis prefix, started one after the other. */
export async function startCluster(count: number, overrides: Record<string, string> = {}): Promise<TestCluster> {
  const environment = await createTestEnvironment({ ...FAST_CLUSTER, ...overrides });
  const gateways: RunningGateway[] = [];
  for (let index = 0; index < count; index++) gateways.push(await startTestGateway({ ...FAST_CLUSTER, ...overrides }, {}, environment));
  const admins = await Promise.all(gateways.map((gateway) => adminClient(gateway.client)));
  const token = (await login(gateways[0]!.client, ADMIN_EMAIL, ADMIN_PASSWORD)).access_token;
  const sockets: TestSocket[] = [];
  return {
    environment,
    gateways,
    admins,
    token,
    sockets,
    subscribe: async (index, topics) => {
      const socket = await TestSocket.open(gateways[index]!.baseUrl, { headers: { authorization: `Bearer ${token}` } });
      sockets.push(socket);
      expect((await socket.request({ op: 'subscribe', topics })).op).toBe('subscribed');
      return socket;
    },
    upload: async (index, ...poses) => {
      const answer = await admins[index]!.post('/api/v1/realtime/positions', { poses });
      expect(answer.status, answer.text).toBe(204);
    },
    stop: async () => {
      for (const socket of sockets) socket.close();
      for (const gateway of gateways) await gateway.gateway.close().catch(() => undefined);
      await environment.cleanup();
    },
  };
}

/** Resolves once the running gateways agree: each sees all of them, and every shard is held and ready on exactly one. */
export async function converged(
  gateways: readonly RunningGateway[],
  shards = Number(FAST_CLUSTER.CLUSTER_SHARDS),
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const nodes = gateways.map((gateway) => gateway.gateway.services.cluster);
    const ready = nodes.flatMap((node) => node.readyShards).sort((a, b) => a - b);
    const agreed = nodes.every((node) => node.liveMembers.length === nodes.length);
    if (
      agreed &&
      ready.length === shards &&
      new Set(ready).size === shards &&
      nodes.every((node) => node.heldShards.length === node.readyShards.length)
    )
      return;
    if (Date.now() > deadline)
      throw new Error(`no convergence: members ${nodes.map((node) => node.liveMembers.length)}, ready ${ready.length}/${shards}`);
    await sleep(100);
  }
}

/** The index of the gateway owning the building's detection (exactly one must). */
export function ownerIndex(gateways: readonly RunningGateway[], buildingId: number): number {
  const owners = gateways.flatMap((gateway, index) => (gateway.gateway.services.cluster.ownsBuilding(buildingId) ? [index] : []));
  expect(owners).toHaveLength(1);
  return owners[0]!;
}

/** A building with one floor-0 geofence (square 10..20) of the given max stay, and a pose helper inside it. */
export async function venueWithFence(admin: TestClient, name: string, maxStayTime: number | null = null) {
  const venue = await createVenue(admin, name);
  const fence = await admin.post('/api/v1/geofences', {
    name: `${name} fence`,
    building_id: venue.building.id,
    floor_id: venue.floors[0].id,
    type: 'POLYGON',
    cartesians: squareCartesians(10, 10, 10),
    max_stay_time: maxStayTime,
  });
  expect(fence.status, fence.text).toBe(201);
  const at = (deviceId: string, x: number, y: number) => ({
    device_id: deviceId,
    timestamp: Date.now(),
    building_id: venue.building.id,
    floor_id: venue.floors[0].id,
    x,
    y,
  });
  return { building: venue.building as { id: number }, fence: fence.body as { id: string }, at };
}
