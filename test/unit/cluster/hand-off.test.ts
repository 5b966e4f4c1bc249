import { describe, expect, it } from 'vitest';
import { ClusterNode } from '../../../gateway/cluster/cluster-node.js';
import type { ShardHandler } from '../../../gateway/cluster/shard-handler.js';
import type { Coordination } from '../../../gateway/cluster/coordination.js';
import type { ShardLog } from '../../../gateway/cluster/shard-log.js';
import { EncodedPayload } from '../../../shared/bus/encoded-payload.js';
import { createLogger } from '../../../shared/logger.js';
import { PositionsMessage, type EncodedPositions } from '../../../shared/positions/positions-message.js';
import { positionRecord } from '../../../testkit/positions.js';

/** A log that only records what is appended to it. */
class AppendedLog implements ShardLog {
  readonly appended: { shard: number; positions: EncodedPositions }[] = [];
  async append(shard: number, positions: EncodedPositions) {
    this.appended.push({ shard, positions });
  }
  async open() {}
  async takePending() {
    return [];
  }
  async read() {
    return new Map();
  }
  async ack() {}
  async backlog(shards: readonly number[]) {
    return shards.map(() => 0);
  }
  async organizationBacklog(shards: readonly number[]) {
    return shards.map(() => ({ total: 0, organizations: new Map<string, number>() }));
  }
  async close() {}
}

const handler: ShardHandler = {
  gain: async () => undefined,
  lose: () => undefined,
  process: async () => true,
  stored: async () => true,
  buildingsIn: () => 0,
};
const record = (deviceId: string, buildingId: number) => positionRecord({ deviceId, buildingId, x: 1, y: 1, accuracy: null, timestamp: 1 });

function node(log: ShardLog): ClusterNode {
  return new ClusterNode({} as Coordination, log, handler, { shards: 64, heartbeatMs: 1000, ttlMs: 3000 }, createLogger('silent'));
}

describe('ClusterNode.handOff: one packing per upload', () => {
  it('appends an upload of one shard as the payload the bus published, so its bytes are packed once', async () => {
    const log = new AppendedLog();
    const records = [record('a', 7), record('b', 7)];
    const cluster = node(log);
    const published = new EncodedPayload(new PositionsMessage('org', records));
    await cluster.handOff(records, new Map([[cluster.shardOf(records[0]!), published]]));
    expect(log.appended).toHaveLength(1);
    expect(log.appended[0]!.positions).toBe(published);
  });

  it('splits an upload across shards into one entry per shard, each with its own records, unless the bus published them all', async () => {
    const cluster = node(new AppendedLog());
    // Two buildings in different shards.
    const second = Array.from({ length: 50 }, (_, id) => id + 2).find(
      (id) => cluster.shardOf(record('x', id)) !== cluster.shardOf(record('x', 1)),
    )!;
    const records = [record('a', 1), record('b', second), record('c', 1)];
    const firstShard = new EncodedPayload(new PositionsMessage('org', [records[0]!, records[2]!]));
    // No publication, or one that does not hold every record (b's shard missing): grouped and packed here.
    for (const published of [undefined, new Map([[cluster.shardOf(records[0]!), firstShard]])]) {
      const log = new AppendedLog();
      await node(log).handOff(records, published);
      const byShard = new Map(log.appended.map(({ shard, positions }) => [shard, positions.value.records.map((item) => item.deviceId)]));
      expect(byShard).toEqual(
        new Map([
          [cluster.shardOf(record('a', 1)), ['a', 'c']],
          [cluster.shardOf(record('b', second)), ['b']],
        ]),
      );
    }
    // Every record published: each shard's entry is its publication, as is.
    const log = new AppendedLog();
    const secondShard = new EncodedPayload(new PositionsMessage('org', [records[1]!]));
    await node(log).handOff(
      records,
      new Map([
        [cluster.shardOf(records[0]!), firstShard],
        [cluster.shardOf(records[1]!), secondShard],
      ]),
    );
    expect(log.appended.map(({ positions }) => positions)).toEqual([firstShard, secondShard]);
    expect(log.appended[0]!.positions).toBe(firstShard);
  });
});
