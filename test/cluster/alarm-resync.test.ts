import { describe, expect, it } from 'vitest';
import { serverRedisUrl } from '../../testkit/test-environment.js';
import { TestSocket } from '../../testkit/ws-client.js';
import { clusterOnPrivateRedis, sleep } from './cluster-support.js';

/**
 * A control room never misses an alarm raised on another gateway while Redis was away. The bus is at most once:
 * the alarm is stored, but its push from the gateway that raised it is lost. When the bus of the screen's gateway
 * comes back (a resync), its sockets that follow alarm topics are closed with 1012, and the screen resumes with
 * `since_seq`, which replays what it missed from storage.
 */
describe.skipIf(!serverRedisUrl)('an alarm raised on one gateway while Redis is away (private Redis)', () => {
  const suite = clusterOnPrivateRedis(2);

  it('reaches an alarm screen on the other gateway: told to resume, it gets the alarm from storage', async () => {
    const { redis, cluster } = suite;
    expect((await cluster.admins[0]!.post('/api/v1/devices', { identifier: 'phone-in-the-lift' })).status).toBe(201);
    const screen = await cluster.subscribe(1, ['organization/alarms']);
    const positions = await cluster.subscribe(1, ['devices/phone-in-the-lift']);
    await redis.stop();
    const raised = await cluster.admins[0]!.post('/api/v1/alarms', { type: 'DANGER', device_id: 'phone-in-the-lift', comment: 'pressed' });
    expect(raised.status, raised.text).toBe(201);
    const alarm = raised.body as { id: string; seq: number };
    await sleep(4000); // the raising gateway's queued push is given up: its retries are spent
    await redis.resume();

    // Either the push came through after all, or the screen is told to resume: never neither.
    const pushed = await screen
      .next((frame) => frame.op === 'alarm' && frame.data?.id === alarm.id, 15_000)
      .then(
        () => true,
        () => false,
      );
    if (!pushed) {
      await screen.closed(15_000);
      expect(screen.closeCode).toBe(1012);
      const resumed = await TestSocket.open(cluster.gateways[1]!.baseUrl, { headers: { authorization: `Bearer ${cluster.token}` } });
      cluster.sockets.push(resumed);
      const replay = resumed.next((frame) => frame.op === 'alarm' && frame.data?.id === alarm.id, 10_000);
      await resumed.request({ op: 'subscribe', topics: ['organization/alarms'], since_seq: alarm.seq - 1 });
      expect((await replay).replay).toBe(true);
    }
    // A socket that follows no alarm topic is left open: nothing it follows is replayed.
    expect(positions.closeCode).toBeUndefined();
  }, 90_000);
});
