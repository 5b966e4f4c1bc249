import { afterEach, describe, expect, it } from 'vitest';
import { shardOfBuilding } from '../../gateway/cluster/rendezvous.js';
import { createOrganization } from '../../testkit/identity.js';
import { serverRedisUrl } from '../../testkit/test-environment.js';
import { converged, ownerIndex, sleep, startCluster, venueWithFence, type TestCluster } from './cluster-support.js';

/**
 * Detection paces ingest: once a building's shard holds CLUSTER_MAX_BACKLOG entries its owner has not
 * acknowledged (here: the owner crashed and its lease has not expired yet), uploads for it wait, then get 503
 * with Retry-After, storing nothing; once a survivor has taken the building over and caught up they are accepted again.
 */
describe.skipIf(!serverRedisUrl)('uploads paced by their building’s detection', () => {
  let cluster: TestCluster | undefined;
  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });

  it('refuses uploads with 503 and Retry-After while the shard’s owner is gone and its backlog is at the bound, and takes them again once caught up', async () => {
    // A lease outlives the crash by a few seconds: the refusals below come before any takeover.
    const running = (cluster = await startCluster(2, {
      CLUSTER_MAX_BACKLOG: '2',
      CLUSTER_BACKLOG_WAIT_MS: '300',
      CLUSTER_MEMBER_TTL_MS: '5000',
    }));
    await converged(running.gateways);
    const venue = await venueWithFence(running.admins[0]!, 'Paced venue');
    const owner = ownerIndex(running.gateways, venue.building.id);
    const survivor = 1 - owner;
    await running.gateways[owner]!.gateway.services.cluster.abandon(); // as kill -9: the lease stays until it expires
    await running.upload(survivor, venue.at('first', 1, 1));
    await running.upload(survivor, venue.at('second', 2, 2));
    const refused = await running.admins[survivor]!.post('/api/v1/realtime/positions', { poses: [venue.at('refused', 3, 3)] });
    expect(refused.status, refused.text).toBe(503);
    expect(refused.body).toMatchObject({ status: 503, code: 'unavailable' });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    const storage = running.gateways[survivor]!.gateway.services.storage;
    expect(await storage.execute(`select device_id from positions where device_id = 'refused'`)).toEqual([]);
    // A DANGER button pressed meanwhile is raised at once, even though its upload is refused for pacing (its retry
    // raises nothing twice: alarms asked for by a pose are keyed by it).
    const sos = await running.admins[survivor]!.post('/api/v1/realtime/positions', { poses: [{ ...venue.at('sos', 4, 4), danger: true }] });
    expect(sos.status, sos.text).toBe(503);
    expect(await storage.execute(`select occurrences from alarms where device_id = 'sos' and type = 'DANGER'`)).toEqual([
      { occurrences: 1 },
    ]);

    // The survivor takes the building over, detects the two waiting uploads and acknowledges them: the app's retry goes through.
    const deadline = Date.now() + 30_000;
    let retried = refused;
    while (retried.status === 503 && Date.now() < deadline) {
      await sleep(500);
      retried = await running.admins[survivor]!.post('/api/v1/realtime/positions', { poses: [venue.at('refused', 3, 3)] });
    }
    expect(retried.status, retried.text).toBe(204);
    expect(running.gateways[survivor]!.gateway.services.cluster.ownsBuilding(venue.building.id)).toBe(true);
    expect(await storage.execute(`select device_id from positions where device_id = 'refused'`)).toHaveLength(1);
  });

  it("paces per organization: while tenant A is at the bound in a shard, tenant B's uploads to a building of that shard go through at once (issue 28 item 6)", async () => {
    const shards = 2;
    const running = (cluster = await startCluster(2, {
      CLUSTER_SHARDS: String(shards),
      CLUSTER_MAX_BACKLOG: '2',
      CLUSTER_BACKLOG_WAIT_MS: '300',
      CLUSTER_MEMBER_TTL_MS: '5000',
    }));
    await converged(running.gateways, shards);
    const venueA = await venueWithFence(running.admins[0]!, 'Tenant A venue');
    const owner = ownerIndex(running.gateways, venueA.building.id);
    const survivor = 1 - owner;
    // Tenant B, with a building in tenant A's shard.
    const tenantB = await createOrganization(running.admins[survivor]!);
    let venueB = await venueWithFence(tenantB.client, 'Tenant B venue');
    while (shardOfBuilding(venueB.building.id, shards) !== shardOfBuilding(venueA.building.id, shards))
      venueB = await venueWithFence(tenantB.client, 'Tenant B venue');
    await running.gateways[owner]!.gateway.services.cluster.abandon(); // the shard's detection stops: its backlog grows
    await running.upload(survivor, venueA.at('a1', 1, 1));
    await running.upload(survivor, venueA.at('a2', 2, 2));
    const refusedA = await running.admins[survivor]!.post('/api/v1/realtime/positions', { poses: [venueA.at('a3', 3, 3)] });
    expect(refusedA.status, refusedA.text).toBe(503);
    // B's backlog in the same shard is its own: never paced by A's.
    for (const device of ['b1', 'b2']) {
      const accepted = await tenantB.client.post('/api/v1/realtime/positions', { poses: [venueB.at(device, 4, 4)] });
      expect(accepted.status, accepted.text).toBe(204);
    }
    const storage = running.gateways[survivor]!.gateway.services.storage;
    expect(
      (await storage.execute(`select device_id from positions where device_id in ('b1', 'b2') order by device_id`)).map(
        (row: any) => row.device_id,
      ),
    ).toEqual(['b1', 'b2']);
  });
});
