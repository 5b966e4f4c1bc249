import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverRedisUrl } from '../../testkit/test-environment.js';
import { converged, ownerIndex, sleep, startCluster, venueWithFence, type TestCluster } from './cluster-support.js';

/**
 * Three gateways in one process on PostgreSQL + Redis: whichever gateway receives a position, each building's
 * detection runs on exactly one of them, so each enter/exit and each alarm is stored once and pushed once.
 */
describe.skipIf(!serverRedisUrl)('three gateways share detection by building', () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster(3);
    await converged(cluster.gateways);
  }, 60_000);
  afterAll(async () => cluster?.stop());

  it('runs as three distinct members, each building owned by exactly one', () => {
    const services = cluster.gateways.map((gateway) => gateway.gateway.services);
    expect(new Set(services.map((service) => service.bus.nodeId)).size).toBe(3);
    expect(new Set(services.map((service) => service.cluster.memberId)).size).toBe(3);
    for (let building = 1; building <= 50; building++) ownerIndex(cluster.gateways, building);
    // Every gateway holds some shards: the work is shared.
    for (const service of services) expect(service.cluster.heldShards.length).toBeGreaterThan(0);
  });

  it('stores and pushes each enter and exit once, whichever gateway received the positions', async () => {
    const venues = [];
    for (let index = 0; index < 4; index++) venues.push(await venueWithFence(cluster.admins[0]!, `Cluster venue ${index}`));
    const topics = venues.map((venue) => `buildings/${venue.building.id}/geofence-events`);
    const watchers = await Promise.all(cluster.gateways.map((_, index) => cluster.subscribe(index, topics)));
    for (const [index, venue] of venues.entries()) {
      // Enter through one gateway, exit through another: the owner sees both, in order.
      await cluster.upload(index % 3, venue.at(`walker-${index}`, 15, 15));
      await cluster.upload((index + 1) % 3, venue.at(`walker-${index}`, 50, 50));
    }
    for (const watcher of watchers) {
      for (const [index, venue] of venues.entries()) {
        await watcher.next(
          (frame) =>
            frame.op === 'geofence_event' &&
            frame.data.device_id === `walker-${index}` &&
            frame.data.type === 'exit' &&
            frame.data.building_id === venue.building.id,
          10_000,
        );
      }
    }
    await sleep(500); // a duplicate would have come by now
    for (const watcher of watchers) {
      const events = watcher.frames
        .filter((frame) => frame.op === 'geofence_event')
        .map((frame) => `${frame.data.device_id} ${frame.data.type}`)
        .sort();
      expect(events).toEqual(venues.flatMap((_, index) => [`walker-${index} enter`, `walker-${index} exit`]).sort());
    }
    const stored = await cluster.gateways[0]!.gateway.services.storage.execute<{ device_id: string; type: string }>(
      "select device_id, type from zone_events where device_id like 'walker-%' order by device_id, at",
    );
    expect(stored.map((row) => `${row.device_id} ${row.type}`)).toEqual(
      venues.flatMap((_, index) => [`walker-${index} enter`, `walker-${index} exit`]),
    );
  });

  it('raises a max stay once, from the building’s owner, whichever gateways received the positions', async () => {
    const venue = await venueWithFence(cluster.admins[0]!, 'Max stay venue', 1);
    const controls = await Promise.all(cluster.gateways.map((_, index) => cluster.subscribe(index, ['organization/alarms'])));
    for (let index = 0; index < 3; index++) await cluster.upload(index, venue.at('sitter', 15 + index * 0.1, 15));
    for (const control of controls)
      await control.next(
        (frame) => frame.op === 'alarm' && frame.data.type === 'GEOFENCE_MAX_STAY_TIME' && frame.data.device_id === 'sitter',
        10_000,
      );
    await sleep(1500);
    for (const control of controls)
      expect(control.frames.filter((frame) => frame.op === 'alarm' && frame.data.device_id === 'sitter')).toHaveLength(1);
    const listed = await cluster.admins[1]!.get('/api/v1/alarms?type=GEOFENCE_MAX_STAY_TIME&device_id=sitter');
    expect(listed.body.data).toHaveLength(1);
    expect(listed.body.data[0].occurrences).toBe(1);
  });
});
