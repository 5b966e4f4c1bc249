import { afterEach, describe, expect, it } from 'vitest';
import { serverRedisUrl } from '../../testkit/test-environment.js';
import { converged, ownerIndex, sleep, startCluster, venueWithFence, type TestCluster } from './cluster-support.js';

/**
 * An owner gone (closed, or crashed: heartbeats and leases stop without anything given back) is replaced by
 * the survivor within a few seconds, which raises what the silence or the stay called for, once.
 * Rebuilding state on takeover is the rebuild branch's DetectorStateLoader: the tests marked [rebuild] need it.
 */
describe.skipIf(!serverRedisUrl)('failover of a building’s owner', () => {
  let cluster: TestCluster | undefined;
  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });

  /** Asked of a gateway that is still up (`via`): the owner may be the one gone. */
  const deadmanAlarms = async (running: TestCluster, deviceId: string, via: number) =>
    (await running.admins[via]!.get(`/api/v1/alarms?type=DEADMAN&device_id=${deviceId}`)).body.data as {
      occurrences: number;
      details: { reason: string };
    }[];

  it('after a crash, positions the dead owner never read are detected by the survivor: a silent device gets its dead-man alarm once', async () => {
    const running = (cluster = await startCluster(2));
    await converged(running.gateways);
    const venue = await venueWithFence(running.admins[0]!, 'Crash venue');
    expect((await running.admins[0]!.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, { deadman_silence_s: 2 })).status).toBe(
      200,
    );
    const owner = ownerIndex(running.gateways, venue.building.id);
    const survivor = 1 - owner;
    const control = await running.subscribe(survivor, [`buildings/${venue.building.id}/alarms`]);
    await running.gateways[owner]!.gateway.services.cluster.abandon(); // as kill -9: nothing released
    await running.upload(survivor, venue.at('lone', 40, 40)); // queued for the building's owner, whoever it will be
    const alarm = await control.next(
      (frame) => frame.op === 'alarm' && frame.data.type === 'DEADMAN' && frame.data.device_id === 'lone',
      15_000,
    );
    expect(alarm.data.details.reason).toBe('silence');
    expect(running.gateways[survivor]!.gateway.services.cluster.ownsBuilding(venue.building.id)).toBe(true);
    await sleep(3000);
    expect(await deadmanAlarms(running, 'lone', survivor)).toMatchObject([{ occurrences: 1 }]);
  });

  it('[rebuild] after a graceful close of the owner, the survivor raises the dead-man alarm of a device that fell silent, once', async () => {
    const running = (cluster = await startCluster(2));
    await converged(running.gateways);
    const venue = await venueWithFence(running.admins[0]!, 'Close venue');
    expect((await running.admins[0]!.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, { deadman_silence_s: 3 })).status).toBe(
      200,
    );
    const owner = ownerIndex(running.gateways, venue.building.id);
    const survivor = 1 - owner;
    const control = await running.subscribe(survivor, [`buildings/${venue.building.id}/alarms`]);
    await running.upload(owner, venue.at('quiet', 40, 40));
    await sleep(300); // detected by the owner
    await running.gateways[owner]!.gateway.close();
    await converged([running.gateways[survivor]!]);
    await control.next((frame) => frame.op === 'alarm' && frame.data.type === 'DEADMAN' && frame.data.device_id === 'quiet', 15_000);
    await sleep(3000);
    expect(await deadmanAlarms(running, 'quiet', survivor)).toMatchObject([{ occurrences: 1, details: { reason: 'silence' } }]);
  });

  it('[rebuild] a stay that runs over across a crash of the owner raises one max-stay alarm', async () => {
    const running = (cluster = await startCluster(2));
    await converged(running.gateways);
    const venue = await venueWithFence(running.admins[0]!, 'Stay venue', 4);
    const owner = ownerIndex(running.gateways, venue.building.id);
    const survivor = 1 - owner;
    const control = await running.subscribe(survivor, ['organization/alarms']);
    await running.upload(owner, venue.at('stayer', 15, 15)); // enters: the stay starts on the owner
    await sleep(500);
    await running.gateways[owner]!.gateway.services.cluster.abandon();
    await running.upload(survivor, venue.at('stayer', 15.5, 15)); // still inside, during the takeover
    await control.next(
      (frame) => frame.op === 'alarm' && frame.data.type === 'GEOFENCE_MAX_STAY_TIME' && frame.data.device_id === 'stayer',
      15_000,
    );
    await sleep(2000);
    const listed = await running.admins[survivor]!.get('/api/v1/alarms?type=GEOFENCE_MAX_STAY_TIME&device_id=stayer');
    expect(listed.body.data).toMatchObject([{ occurrences: 1 }]);
    const enters = await running.gateways[survivor]!.gateway.services.storage.execute(
      "select type from zone_events where device_id = 'stayer'",
    );
    expect(enters).toHaveLength(1); // the enter, stored once: the survivor did not find it again
  });
});
