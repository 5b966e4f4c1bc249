import { describe, expect, it } from 'vitest';
import { serverRedisUrl } from '../../testkit/test-environment.js';
import { clusterOnPrivateRedis, converged, ownerIndex, sleep, venueWithFence } from './cluster-support.js';

/**
 * A Redis restart loses memberships, leases and the shard streams with their consumer groups. The gateways
 * register again, take every shard again (each once), rebuild from storage and detect again.
 */
describe.skipIf(!serverRedisUrl)('two gateways converge after a Redis restart (private Redis)', () => {
  const suite = clusterOnPrivateRedis(2);

  it('owns every building once again and detects again', async () => {
    const { redis, cluster } = suite;
    const venue = await venueWithFence(cluster.admins[0]!, 'Restart venue');
    await redis.stop();
    await sleep(1500); // leases lapse: nobody emits meanwhile
    expect(cluster.gateways.every((gateway) => gateway.gateway.services.cluster.heldShards.length === 0)).toBe(true);
    await redis.resume();
    await converged(cluster.gateways, undefined, 30_000);
    ownerIndex(cluster.gateways, venue.building.id);
    const watcher = await cluster.subscribe(1, [`buildings/${venue.building.id}/geofence-events`]);
    await cluster.upload(0, venue.at('returner', 15, 15));
    await watcher.next(
      (frame) => frame.op === 'geofence_event' && frame.data.device_id === 'returner' && frame.data.type === 'enter',
      10_000,
    );
    await sleep(500);
    const stored = await cluster.gateways[0]!.gateway.services.storage.execute("select type from zone_events where device_id = 'returner'");
    expect(stored).toHaveLength(1);
  });
});
