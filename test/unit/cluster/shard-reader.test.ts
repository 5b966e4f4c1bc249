import { afterEach, describe, expect, it } from 'vitest';
import { ClusterNode } from '../../../gateway/cluster/cluster-node.js';
import { LocalCoordination } from '../../../gateway/cluster/coordination.js';
import { LocalShardLog } from '../../../gateway/cluster/local-shard-log.js';
import { shardOfBuilding } from '../../../gateway/cluster/rendezvous.js';
import type { ShardHandler } from '../../../gateway/cluster/shard-handler.js';
import { createLogger } from '../../../shared/logger.js';
import { positionRecord } from '../../../testkit/positions.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const until = async (check: () => boolean | Promise<boolean>) => {
  for (let attempt = 0; attempt < 300 && !(await check()); attempt++) await sleep(10);
};
/** Two buildings in two different shards of two. */
const SHARDS = 2;
const HEAVY_BUILDING = 3;
const LIGHT_BUILDING = 1;
const heavyShard = shardOfBuilding(HEAVY_BUILDING, SHARDS);
const lightShard = shardOfBuilding(LIGHT_BUILDING, SHARDS);

const record = (deviceId: string, organizationId: string, buildingId: number) =>
  positionRecord({ deviceId, organizationId, buildingId, timestamp: 1 });

describe('ShardReader: each shard read again as soon as its own entries are done (issue 28 item 6)', () => {
  let node: ClusterNode | undefined;
  let release: (() => void) | undefined;
  afterEach(async () => {
    release?.();
    await node?.stop();
    node = undefined;
  });

  /** A member owning both shards, each ready. */
  async function started(handler: ShardHandler, log: LocalShardLog): Promise<ClusterNode> {
    const member = new ClusterNode(
      new LocalCoordination('only'),
      log,
      handler,
      { shards: SHARDS, heartbeatMs: 50, ttlMs: 500 },
      createLogger('silent'),
    );
    await member.start();
    await until(() => member.readyShards.length === SHARDS);
    return member;
  }

  it("reads, processes and acknowledges tenant B's new entries while tenant A's shard is still being detected, each shard in order", async () => {
    expect(heavyShard).not.toBe(lightShard);
    const processed: string[] = [];
    /** Shards being processed now: one shard's entries are never processed two reads at once. */
    const busy = new Set<number>();
    let overlapped = false;
    const heavyDone = new Promise<void>((resolve) => (release = resolve));
    const handler: ShardHandler = {
      gain: async () => undefined,
      lose: () => undefined,
      process: async (shard, entries) => {
        if (busy.has(shard)) overlapped = true;
        busy.add(shard);
        processed.push(...entries.map((entry) => entry.records[0]!.deviceId));
        // Tenant A's costly detection holds its shard until released.
        if (shard === heavyShard) await heavyDone;
        busy.delete(shard);
        return true;
      },
      stored: async () => true,
      buildingsIn: () => 0,
    };
    const log = new LocalShardLog();
    node = await started(handler, log);

    await node.handOff([record('a1', 'tenant-a', HEAVY_BUILDING)]);
    await until(() => processed.includes('a1'));
    await node.handOff([record('a2', 'tenant-a', HEAVY_BUILDING)]);
    for (const device of ['b1', 'b2', 'b3']) {
      await node.handOff([record(device, 'tenant-b', LIGHT_BUILDING)]);
      await until(() => processed.includes(device));
    }
    await until(async () => (await log.backlog([lightShard]))[0] === 0);

    // B's uploads were read, detected and acknowledged one after another while A's first read was still detected.
    expect(processed).toEqual(['a1', 'b1', 'b2', 'b3']);
    expect(await log.backlog([lightShard])).toEqual([0]);
    expect(await log.backlog([heavyShard])).toEqual([2]);

    release!();
    await until(() => processed.includes('a2'));
    await until(async () => (await log.backlog([heavyShard]))[0] === 0);
    expect(processed).toEqual(['a1', 'b1', 'b2', 'b3', 'a2']);
    expect(await log.backlog([heavyShard])).toEqual([0]);
    expect(overlapped).toBe(false);
  });

  it('finishes the entries under way before giving a shard back on stop: nothing processed is left unacknowledged', async () => {
    const processed: string[] = [];
    let finish: (() => void) | undefined;
    const handler: ShardHandler = {
      gain: async () => undefined,
      lose: () => undefined,
      process: async (_shard, entries) => {
        await new Promise<void>((resolve) => (finish = resolve));
        processed.push(...entries.map((entry) => entry.records[0]!.deviceId));
        return true;
      },
      stored: async () => true,
      buildingsIn: () => 0,
    };
    const log = new LocalShardLog();
    node = await started(handler, log);
    await node.handOff([record('b1', 'tenant-b', LIGHT_BUILDING)]);
    await until(() => finish !== undefined);
    const stopping = node.stop();
    finish!();
    await stopping;
    node = undefined;
    expect(processed).toEqual(['b1']);
    expect(await log.backlog([lightShard])).toEqual([0]);
  });
});
