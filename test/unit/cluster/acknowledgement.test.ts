import { afterEach, describe, expect, it } from 'vitest';
import { ClusterNode } from '../../../gateway/cluster/cluster-node.js';
import type { ShardHandler } from '../../../gateway/cluster/shard-handler.js';
import { LocalCoordination } from '../../../gateway/cluster/coordination.js';
import { LocalShardLog } from '../../../gateway/cluster/local-shard-log.js';
import { createLogger } from '../../../shared/logger.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const record = (deviceId: string, organizationId = 'org') => ({
  organizationId,
  deviceId,
  userId: null,
  buildingId: 1,
  floorId: 1,
  indoor: true,
  x: 1,
  y: 1,
  lat: 0,
  lng: 0,
  yaw: 0,
  accuracy: null,
  timestamp: 1,
  receivedAt: 1,
});

describe('ClusterNode: acknowledging once stored', () => {
  let node: ClusterNode | undefined;
  let open: (() => void) | undefined;
  afterEach(async () => {
    open?.();
    await node?.stop();
    node = undefined;
  });

  it('detects the next read while the last one is being stored, and acknowledges each only once stored', async () => {
    const processed: string[] = [];
    let storing = true;
    const gate = new Promise<void>((resolve) => (open = () => ((storing = false), resolve())));
    const handler: ShardHandler = {
      gain: async () => undefined,
      lose: () => undefined,
      process: async (_shard, entries) => (processed.push(...entries.map((entry) => entry.records[0]!.deviceId)), true),
      stored: async () => (await gate, !storing),
      buildingsIn: () => 0,
    };
    const log = new LocalShardLog();
    node = new ClusterNode(new LocalCoordination('only'), log, handler, { shards: 1, heartbeatMs: 50, ttlMs: 500 }, createLogger('silent'));
    await node.start();
    for (let attempt = 0; attempt < 100 && node.readyShards.length === 0; attempt++) await sleep(10);
    await node.handOff([record('first')]);
    for (let attempt = 0; attempt < 100 && !processed.includes('first'); attempt++) await sleep(10);
    await node.handOff([record('second')]); // the first one's detections are still being stored
    for (let attempt = 0; attempt < 100 && !processed.includes('second'); attempt++) await sleep(10);
    expect(processed).toEqual(['first', 'second']);
    expect(await log.backlog([0])).toEqual([2]); // nothing acknowledged before it is stored
    open!();
    for (let attempt = 0; attempt < 100 && (await log.backlog([0]))[0]! > 0; attempt++) await sleep(10);
    expect(await log.backlog([0])).toEqual([0]);
  });

  it("acknowledges a tenant's entries once its own detections are stored, while another tenant's in the same shard still wait (issue 28 item 6)", async () => {
    const asked: string[][] = [];
    const handler: ShardHandler = {
      gain: async () => undefined,
      lose: () => undefined,
      process: async () => true,
      // Tenant A's detections never run dry (its costly building keeps adding); tenant B's are stored at once.
      stored: async (organizations) => (
        asked.push([...(organizations ?? [])]), organizations !== undefined && !organizations.has('tenant-a')
      ),
      buildingsIn: () => 0,
    };
    const log = new LocalShardLog();
    node = new ClusterNode(new LocalCoordination('only'), log, handler, { shards: 1, heartbeatMs: 50, ttlMs: 500 }, createLogger('silent'));
    await node.start();
    for (let attempt = 0; attempt < 100 && node.readyShards.length === 0; attempt++) await sleep(10);
    await node.handOff([record('a1', 'tenant-a')]);
    await node.handOff([record('b1', 'tenant-b')]);
    await node.handOff([record('a2', 'tenant-a')]);
    await node.handOff([record('b2', 'tenant-b')]);
    for (let attempt = 0; attempt < 500 && (await log.organizationBacklog([0]))[0]!.organizations.has('tenant-b'); attempt++)
      await sleep(10);
    const [backlog] = await log.organizationBacklog([0]);
    expect(backlog!.organizations.get('tenant-b')).toBeUndefined();
    expect(backlog!.organizations.get('tenant-a')).toBe(2);
    // Each organization asked about on its own, never all at once.
    expect(asked.every((organizations) => organizations.length === 1)).toBe(true);
  });
});
