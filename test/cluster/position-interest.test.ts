import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardOfBuilding } from '../../gateway/cluster/rendezvous.js';
import type { PositionsMessage } from '../../shared/positions/positions-message.js';
import { redisClusterSkipReason, startRedisCluster, type LocalRedisCluster } from '../../testkit/redis-cluster.js';
import { serverDatabaseUrl, serverRedisUrl } from '../../testkit/test-environment.js';
import { FAST_CLUSTER, converged, ownerIndex, sleep, startCluster, venueWithFence, type TestCluster } from './cluster-support.js';

/** Short, so the test sees a channel given up; the default is seconds. */
const LINGER_MS = 200;

/**
 * Issue 33, interest-based subscription: of two gateways, the one that does not own building X and has no socket
 * following it receives none of X's live positions from the bus; once a socket there follows X (its `subscribed`
 * answered), it receives every one uploaded through the other gateway from then on; once the socket leaves, the
 * channel is given up after the linger and nothing comes again.
 */
function interestScenario(start: () => Promise<TestCluster>, stop: () => Promise<void>) {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await start();
    await converged(cluster.gateways);
  }, 90_000);
  afterAll(stop);

  it('receives a building’s positions only while a socket here follows it, missing none after `subscribed`', async () => {
    const venue = await venueWithFence(cluster.admins[0]!, 'Interest venue');
    const building = venue.building.id;
    const owner = ownerIndex(cluster.gateways, building);
    const idle = 1 - owner;
    const realtime = cluster.gateways[idle]!.gateway.services.realtime;
    // What reaches the idle gateway's live side from the bus (every upload below goes through the owner).
    const seen: string[] = [];
    const original = realtime.onPositions.bind(realtime);
    realtime.onPositions = (message: PositionsMessage) => {
      for (const record of message.records) if (record.buildingId === building) seen.push(record.deviceId);
      original(message);
    };
    try {
      for (let n = 0; n < 5; n++) await cluster.upload(owner, venue.at(`before-${n}`, 30, 30));
      await sleep(500); // a message on its way would have come by now
      expect(seen).toEqual([]);
      expect(realtime.live.size).toBe(0);
      const shard = shardOfBuilding(building, Number(FAST_CLUSTER.CLUSTER_SHARDS));
      expect(realtime.interest.holdsShard(shard)).toBe(false);

      const watcher = await cluster.subscribe(idle, [`buildings/${building}/positions`]);
      const devices = Array.from({ length: 20 }, (_, n) => `after-${n}`);
      for (const device of devices) await cluster.upload(owner, venue.at(device, 30, 30));
      for (const device of devices) await watcher.next((frame) => frame.op === 'position' && frame.data.id === device);
      expect(seen).toEqual(devices);

      watcher.close();
      await watcher.closed();
      await sleep(LINGER_MS + 300);
      expect(realtime.interest.holdsShard(shard)).toBe(false);
      for (let n = 0; n < 5; n++) await cluster.upload(owner, venue.at(`left-${n}`, 30, 30));
      await sleep(500);
      expect(seen).toEqual(devices);
    } finally {
      realtime.onPositions = original;
    }
  });
}

describe.skipIf(!serverRedisUrl)('position interest on Redis pub/sub', () => {
  let cluster: TestCluster | undefined;
  interestScenario(
    async () => (cluster = await startCluster(2, { BUS_INTEREST_LINGER_MS: String(LINGER_MS) })),
    async () => cluster?.stop(),
  );
});

const clusterSkip = !serverDatabaseUrl ? 'needs PostgreSQL (DATABASE_URL): two gateways share one database' : redisClusterSkipReason;
describe.skipIf(Boolean(clusterSkip))('position interest on Redis Cluster sharded pub/sub', () => {
  let redis: LocalRedisCluster | undefined;
  let cluster: TestCluster | undefined;
  interestScenario(
    async () => {
      redis = await startRedisCluster();
      cluster = await startCluster(2, { REDIS_URL: '', REDIS_CLUSTER_NODES: redis.seeds, BUS_INTEREST_LINGER_MS: String(LINGER_MS) });
      return cluster;
    },
    async () => {
      await cluster?.stop();
      await redis?.stop();
    },
  );
});
