import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterKeys } from '../../gateway/cluster/cluster-keys.js';
import { shardOfBuilding } from '../../gateway/cluster/rendezvous.js';
import { redisClusterSkipReason, startRedisCluster, type LocalRedisCluster } from '../../testkit/redis-cluster.js';
import { serverDatabaseUrl } from '../../testkit/test-environment.js';
import { FAST_CLUSTER, converged, ownerIndex, sleep, startCluster, venueWithFence, type TestCluster } from './cluster-support.js';

/**
 * Two gateways and a job worker on a three-master Redis Cluster (REDIS_CLUSTER_NODES) this file starts and
 * kills, on the run's PostgreSQL: live pushes cross gateways over sharded pub/sub, detection runs on each
 * building's owner from the shard streams, and reports run on the worker through BullMQ.
 */
const skipReason = !serverDatabaseUrl
  ? 'needs PostgreSQL (DATABASE_URL): two gateways and a worker share one database'
  : redisClusterSkipReason;
if (skipReason) console.warn(`Redis Cluster end to end skipped: ${skipReason}`);

describe.skipIf(Boolean(skipReason))('two gateways and a worker on a Redis Cluster', () => {
  let redis: LocalRedisCluster;
  let cluster: TestCluster;
  beforeAll(async () => {
    redis = await startRedisCluster();
    // REDIS_URL emptied: the run's Redis (server pass) is not this test's.
    cluster = await startCluster(2, { REDIS_URL: '', REDIS_CLUSTER_NODES: redis.seeds });
    await converged(cluster.gateways);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
    await redis?.stop();
  });

  it('runs its drivers on the cluster: two members sharing the shards', () => {
    const services = cluster.gateways.map((gateway) => gateway.gateway.services);
    expect(services.map((service) => [service.bus.kind, service.jobs.kind])).toEqual([
      ['redis', 'bullmq'],
      ['redis', 'bullmq'],
    ]);
    for (const service of services) expect(service.cluster.heldShards.length).toBeGreaterThan(0);
  });

  it('pushes an alarm raised through one gateway to a socket on the other, once', async () => {
    const control = await cluster.subscribe(1, ['organization/alarms']);
    const raised = await cluster.admins[0]!.post('/api/v1/alarms', { type: 'DANGER', device_id: 'cluster-danger', comment: 'help' });
    expect(raised.status, raised.text).toBe(201);
    const frame = await control.next((candidate) => candidate.op === 'alarm' && candidate.data.device_id === 'cluster-danger', 10_000);
    expect(frame.data).toMatchObject({ id: raised.body.id, type: 'DANGER' });
    await sleep(300);
    expect(control.frames.filter((candidate) => candidate.op === 'alarm' && candidate.data.device_id === 'cluster-danger')).toHaveLength(1);
  });

  it("raises a max stay on the building's owner from positions uploaded through the other, stored once and pushed to both", async () => {
    const venue = await venueWithFence(cluster.admins[0]!, 'Redis Cluster venue', 1);
    const owner = ownerIndex(cluster.gateways, venue.building.id);
    const controls = await Promise.all([0, 1].map((index) => cluster.subscribe(index, ['organization/alarms'])));
    await cluster.upload(1 - owner, venue.at('cluster-sitter', 15, 15));
    await cluster.upload(1 - owner, venue.at('cluster-sitter', 15.1, 15));
    for (const control of controls)
      await control.next(
        (frame) => frame.op === 'alarm' && frame.data.type === 'GEOFENCE_MAX_STAY_TIME' && frame.data.device_id === 'cluster-sitter',
        15_000,
      );
    const listed = await cluster.admins[1]!.get('/api/v1/alarms?type=GEOFENCE_MAX_STAY_TIME&device_id=cluster-sitter');
    expect(listed.body.data).toHaveLength(1);
  });

  it('runs a report on the worker through the job queue on the cluster, and is ready', async () => {
    const venue = await venueWithFence(cluster.admins[0]!, 'Redis Cluster report venue');
    const ready = await cluster.gateways[1]!.client.get('/readyz');
    expect(ready.body).toEqual({ status: 'ok', checks: { storage: 'ok', bus: 'ok', jobs: 'ok' } });
    const answer = await cluster.admins[1]!.get(
      `/api/v1/reports/visitors.json?building_id=${venue.building.id}&from_date=2026-01-01T00:00:00Z&to_date=2026-01-02T00:00:00Z`,
    );
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.meta.map((column: { name: string }) => column.name).length).toBeGreaterThan(0);
  });

  // Last: it restarts a node of the cluster.
  it("detects again after the master holding the building's shard restarts, its stream and lease lost", async () => {
    const venue = await venueWithFence(cluster.admins[0]!, 'Redis Cluster restart venue');
    const shard = shardOfBuilding(venue.building.id, Number(FAST_CLUSTER.CLUSTER_SHARDS));
    const stream = new ClusterKeys(redis.connections, cluster.environment.config.REDIS_PREFIX).shard(shard);
    await redis.restart(await redis.masterOf(stream));
    await converged(cluster.gateways, undefined, 30_000);
    ownerIndex(cluster.gateways, venue.building.id);
    const watcher = await cluster.subscribe(1, [`buildings/${venue.building.id}/geofence-events`]);
    await cluster.upload(0, venue.at('node-returner', 15, 15));
    await watcher.next(
      (frame) => frame.op === 'geofence_event' && frame.data.device_id === 'node-returner' && frame.data.type === 'enter',
      15_000,
    );
    await sleep(500);
    const stored = await cluster.gateways[0]!.gateway.services.storage.execute(
      "select type from zone_events where device_id = 'node-returner'",
    );
    expect(stored).toHaveLength(1);
  });

  // Last of all: it stops the whole cluster.
  it('with every node of the cluster gone, stores uploads (204) and refuses reports with 503, never waiting for it', async () => {
    const venue = await venueWithFence(cluster.admins[0]!, 'Redis Cluster outage venue');
    await redis.stop();
    const upload = await cluster.admins[0]!.post('/api/v1/realtime/positions', { poses: [venue.at('outage-walker', 15, 15)] });
    expect(upload.status, upload.text).toBe(204);
    const report = await cluster.admins[1]!.get(
      `/api/v1/reports/visitors.json?building_id=${venue.building.id}&from_date=2026-01-01T00:00:00Z&to_date=2026-01-02T00:00:00Z`,
    );
    expect(report.status, report.text).toBe(503);
    expect(report.headers.get('retry-after')).toMatch(/^\d+$/);
    const stored = await cluster.gateways[0]!.gateway.services.storage.execute(
      "select device_id from positions where device_id = 'outage-walker'",
    );
    expect(stored).toHaveLength(1);
  });
});
