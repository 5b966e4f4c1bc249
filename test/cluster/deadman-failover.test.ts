import { afterEach, describe, expect, it } from 'vitest';
import { serverRedisUrl } from '../../testkit/test-environment.js';
import { converged, ownerIndex, sleep, startCluster, venueWithFence, type TestCluster } from './cluster-support.js';

const SILENCE_S = 2;

/**
 * A building's owner crashes and its devices, which were uploading through it, can only report again once the
 * survivor has taken the building over, which takes longer than the silence window here (a 3 s lease). The
 * silence was ours: devices reporting within a window after the takeover raise nothing, one that stays silent
 * raises its DEADMAN a window after the takeover.
 */
describe.skipIf(!serverRedisUrl)('failover: no dead-man alarm for the takeover gap', () => {
  let cluster: TestCluster | undefined;
  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });

  it('devices back within a window of the takeover raise nothing; the one still silent raises its DEADMAN a window after it', async () => {
    const running = (cluster = await startCluster(2, { CLUSTER_MEMBER_TTL_MS: '3000' }));
    await converged(running.gateways);
    const venue = await venueWithFence(running.admins[0]!, 'Failover gap venue');
    expect(
      (await running.admins[0]!.put(`/api/v1/buildings/${venue.building.id}/alarm_settings`, { deadman_silence_s: SILENCE_S })).status,
    ).toBe(200);
    const owner = ownerIndex(running.gateways, venue.building.id);
    const survivor = 1 - owner;
    const control = await running.subscribe(survivor, [`buildings/${venue.building.id}/alarms`]);
    await running.upload(owner, venue.at('back-1', 40, 40), venue.at('back-2', 45, 40), venue.at('stays-silent', 50, 40));
    await sleep(300); // detected by the owner
    const crashedAt = Date.now();
    await running.gateways[owner]!.gateway.services.cluster.abandon(); // as kill -9: the lease runs out, 3 s

    const cluster2 = running.gateways[survivor]!.gateway.services.cluster;
    while (!cluster2.ownsBuilding(venue.building.id)) await sleep(50);
    const takenAt = Date.now();
    expect(takenAt - crashedAt).toBeGreaterThan(SILENCE_S * 1000); // the gap is longer than the window
    let reporting = true;
    const reporter = (async () => {
      for (let x = 41; reporting; x++) {
        await running.upload(survivor, venue.at('back-1', x, 40), venue.at('back-2', x + 5, 40));
        await sleep(400);
      }
    })();
    try {
      const frame = await control.next((f) => f.op === 'alarm' && f.data.type === 'DEADMAN', 15_000);
      expect(frame.data).toMatchObject({ device_id: 'stays-silent', details: { reason: 'silence' } });
      await sleep(1500);
    } finally {
      reporting = false;
      await reporter;
    }
    const listed = (await running.admins[survivor]!.get(`/api/v1/alarms?type=DEADMAN&building_id=${venue.building.id}`)).body.data as {
      device_id: string;
      created_at: string;
    }[];
    expect(listed.map((alarm) => alarm.device_id)).toEqual(['stays-silent']);
    expect(new Date(listed[0]!.created_at).getTime()).toBeGreaterThanOrEqual(takenAt + SILENCE_S * 1000 - 500);
    expect(control.frames.filter((f) => f.op === 'alarm' && f.data.type === 'DEADMAN').map((f) => f.data.device_id)).toEqual([
      'stays-silent',
    ]);
  }, 60_000);
});
