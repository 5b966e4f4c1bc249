import { afterEach, describe, expect, it } from 'vitest';
import type { Cluster } from 'ioredis';
import { ClusterKeys } from '../../../gateway/cluster/cluster-keys.js';
import { LocalShardLog } from '../../../gateway/cluster/local-shard-log.js';
import { RedisShardLog } from '../../../gateway/cluster/redis-shard-log.js';
import { SHARD_READ_COUNT, type ShardLog } from '../../../gateway/cluster/shard-log.js';
import { EncodedPayload } from '../../../shared/bus/encoded-payload.js';
import type { PositionRecord } from '../../../shared/positions/position-record.js';
import { PositionsMessage, type EncodedPositions } from '../../../shared/positions/positions-message.js';
import { redisClusterOfThisFile, redisServer } from '../../../testkit/redis-cluster.js';
import { deleteRedisPrefix, serverRedisUrl } from '../../../testkit/test-environment.js';
import { positionRecord } from '../../../testkit/positions.js';

/** One contract, run against every shard log driver this run can reach. */
interface ShardLogFactory {
  name: string;
  /** Two members sharing one log (a previous and a next owner); the local driver has one member only. */
  pair(): { a: ShardLog; b: ShardLog; cleanup(): Promise<void> };
}

const factories: ShardLogFactory[] = [
  {
    name: 'local',
    pair: () => {
      const log = new LocalShardLog();
      return { a: log, b: log, cleanup: () => log.close() };
    },
  },
];
const redisUrl = serverRedisUrl;
if (redisUrl) {
  factories.push({
    name: 'redis',
    pair: () => {
      const prefix = `fctest:shards:${Math.random().toString(36).slice(2)}`;
      const a = new RedisShardLog(redisServer(redisUrl), prefix, 'member-a');
      const b = new RedisShardLog(redisServer(redisUrl), prefix, 'member-b');
      return { a, b, cleanup: async () => (await a.close(), await b.close(), await deleteRedisPrefix(redisUrl, prefix)) };
    },
  });
}
/** A three-master Redis Cluster of this file's own (a stream per slot, read shard by shard), whatever drivers the run selects. */
const cluster = redisClusterOfThisFile();
if (cluster) {
  factories.push({
    name: 'redis-cluster',
    pair: () => {
      const prefix = `fctest:shards:${Math.random().toString(36).slice(2)}`;
      const a = new RedisShardLog(cluster!().connections, prefix, 'member-a');
      const b = new RedisShardLog(cluster!().connections, prefix, 'member-b');
      return { a, b, cleanup: async () => (await a.close(), await b.close()) };
    },
  });
}

const record = (deviceId: string, timestamp: number) =>
  positionRecord({ deviceId, buildingId: 7, x: 1.5, y: 2, lat: 40.1, lng: -3.2, accuracy: null, timestamp });
/** One upload's positions in a shard, as the pipeline hands them over. */
const upload = (...records: PositionRecord[]): EncodedPositions => new EncodedPayload(new PositionsMessage('org', records));
const devices = (entries: readonly { records: PositionRecord[] }[]) =>
  entries.flatMap((entry) => entry.records.map((item) => item.deviceId));

describe.each(factories)('shard log contract: $name', (factory) => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => cleanup?.());

  it('delivers appended entries in order, records intact, including those appended before the shard was opened', async () => {
    const { a, cleanup: c } = factory.pair();
    cleanup = c;
    await a.append(3, upload(record('d1', 1000), record('d2', 1001)));
    await a.open(3);
    await a.append(3, upload(record('d3', 1002)));
    const read = await a.read([3], 500);
    expect(devices(read.get(3)!)).toEqual(['d1', 'd2', 'd3']);
    expect(read.get(3)![0]!.records[0]).toEqual(record('d1', 1000));
  });

  it('keeps shards apart and returns nothing new once everything was delivered', async () => {
    const { a, cleanup: c } = factory.pair();
    cleanup = c;
    await Promise.all([a.open(1), a.open(2)]);
    await a.append(1, upload(record('one', 1)));
    await a.append(2, upload(record('two', 2)));
    const read = await a.read([1], 500);
    expect([...read.keys()]).toEqual([1]);
    expect((await a.read([1], 50)).size).toBe(0);
    expect(devices((await a.read([2], 500)).get(2)!)).toEqual(['two']);
  });

  it("reads a long backlog of one shard a few entries at a time, with another shard's new entry in the first read (issue 28 item 6)", async () => {
    const { a, cleanup: c } = factory.pair();
    cleanup = c;
    await Promise.all([a.open(1), a.open(2)]);
    for (let index = 0; index < SHARD_READ_COUNT * 2 + 3; index++) await a.append(1, upload(record(`heavy${index}`, index)));
    await a.append(2, upload(record('light', 1)));
    const first = await a.read([1, 2], 500);
    expect(devices(first.get(1)!)).toEqual(Array.from({ length: SHARD_READ_COUNT }, (_, index) => `heavy${index}`));
    expect(devices(first.get(2)!)).toEqual(['light']);
    const rest: string[] = [];
    for (let read = 0; read < 2; read++) rest.push(...devices((await a.read([1, 2], 500)).get(1) ?? []));
    expect(rest).toEqual(Array.from({ length: SHARD_READ_COUNT + 3 }, (_, index) => `heavy${SHARD_READ_COUNT + index}`));
  });

  it('wakes a blocked read when an entry is appended', async () => {
    const { a, cleanup: c } = factory.pair();
    cleanup = c;
    await a.open(5);
    const reading = a.read([5], 10_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await a.append(5, upload(record('late', 5)));
    expect(devices((await reading).get(5)!)).toEqual(['late']);
  });

  it('hands what one owner left unacknowledged to the next, in order, and never what was acknowledged', async () => {
    const { a, b, cleanup: c } = factory.pair();
    cleanup = c;
    await a.open(9);
    for (const [index, device] of ['p1', 'p2', 'p3'].entries()) await a.append(9, upload(record(device, index)));
    const delivered = (await a.read([9], 500)).get(9)!;
    await a.ack(9, [delivered[0]!.id]); // the owner dies having stored only the first one's detections
    await a.append(9, upload(record('p4', 4)));
    await b.open(9);
    expect(devices(await b.takePending(9))).toEqual(['p2', 'p3']);
    expect(devices((await b.read([9], 500)).get(9)!)).toEqual(['p4']);
    const all = (await b.takePending(9)).map((entry) => entry.id);
    await b.ack(9, all);
    expect(await b.takePending(9)).toEqual([]);
  });

  it('counts as backlog every entry not yet acknowledged, delivered or not, from before the shard was opened too', async () => {
    const { a, cleanup: c } = factory.pair();
    cleanup = c;
    expect(await a.backlog([4])).toEqual([0]);
    await a.append(4, upload(record('b1', 1)));
    await a.append(4, upload(record('b2', 2), record('b3', 3)));
    expect(await a.backlog([4, 6])).toEqual([2, 0]);
    await a.open(4);
    await a.append(4, upload(record('b4', 4)));
    expect(await a.backlog([4])).toEqual([3]);
    const delivered = (await a.read([4], 500)).get(4)!;
    expect(await a.backlog([4])).toEqual([3]);
    await a.ack(
      4,
      delivered.slice(0, 2).map((entry) => entry.id),
    );
    expect(await a.backlog([4])).toEqual([1]);
    await a.append(4, upload(record('b5', 5)));
    expect(await a.backlog([6, 4])).toEqual([0, 2]);
  });

  it('counts the backlog per organization: appended up, acknowledged down, by whichever member acknowledges (issue 28 item 6)', async () => {
    const { a, b, cleanup: c } = factory.pair();
    cleanup = c;
    const of = (organizationId: string, deviceId: string) =>
      new EncodedPayload(new PositionsMessage(organizationId, [{ ...record(deviceId, 1), organizationId }]));
    const shares = async (log: ShardLog, shard: number) => {
      const [backlog] = await log.organizationBacklog([shard]);
      return { total: backlog!.total, organizations: Object.fromEntries(backlog!.organizations) };
    };
    expect(await shares(a, 5)).toEqual({ total: 0, organizations: {} });
    for (const device of ['a1', 'a2', 'a3']) await a.append(5, of('tenant-a', device));
    await b.append(5, of('tenant-b', 'b1'));
    expect(await shares(a, 5)).toEqual({ total: 4, organizations: { 'tenant-a': 3, 'tenant-b': 1 } });
    await a.open(5);
    const delivered = (await a.read([5], 500)).get(5)!;
    await a.ack(
      5,
      delivered.slice(0, 2).map((entry) => entry.id),
    ); // two of tenant A's
    expect(await shares(b, 5)).toEqual({ total: 2, organizations: { 'tenant-a': 1, 'tenant-b': 1 } });
    // The owner dies; the next one takes what was delivered and not acknowledged, and acknowledges it.
    const pending = await b.takePending(5);
    await b.ack(
      5,
      pending.map((entry) => entry.id),
    );
    expect(await shares(a, 5)).toEqual({ total: 0, organizations: {} });
  });

  it('delivers an upload already packed for the bus as its records, to the member that appended it and to another', async () => {
    const { a, b, cleanup: c } = factory.pair();
    cleanup = c;
    await a.open(4);
    expect((await a.read([4], 10)).size).toBe(0); // a reads shard 4 from now on
    const published = upload(record('mine', 1), record('also-mine', 2));
    void published.bytes; // packed when the bus published it
    await a.append(4, published);
    await b.append(4, upload(record('theirs', 3)));
    const read = (await a.read([4], 500)).get(4)!;
    expect(read.map((entry) => entry.records)).toEqual([[record('mine', 1), record('also-mine', 2)], [record('theirs', 3)]]);
  });
});

describe.runIf(redisUrl)('Redis shard log', () => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => cleanup?.());
  const open = () => {
    const prefix = `fctest:shards:${Math.random().toString(36).slice(2)}`;
    const a = new RedisShardLog(redisServer(redisUrl!), prefix, 'member-a');
    const b = new RedisShardLog(redisServer(redisUrl!), prefix, 'member-b');
    cleanup = async () => (await a.close(), await b.close(), await deleteRedisPrefix(redisUrl!, prefix));
    return { a, b, prefix };
  };

  it('gives the owner back the records it appended itself, undecoded, and decodes the others', async () => {
    const { a, b } = open();
    await a.open(2);
    await a.read([2], 10);
    const mine = upload(record('mine', 1));
    await a.append(2, mine);
    await b.append(2, upload(record('theirs', 2)));
    const [own, other] = (await a.read([2], 500)).get(2)!;
    expect(own!.records).toBe(mine.value.records);
    expect(other!.records).toEqual([record('theirs', 2)]);
  });

  it('remembers appends only to shards it reads: another member taking the entries decodes them', async () => {
    const { a, b } = open();
    await a.open(6);
    await a.read([6], 10);
    await a.read([], 10); // shard 6 given up
    const appended = upload(record('p', 1));
    await a.append(6, appended);
    const read = (await a.read([6], 500)).get(6)!;
    expect(read[0]!.records).not.toBe(appended.value.records);
    expect(read[0]!.records).toEqual([record('p', 1)]);
    expect(await b.takePending(6)).toHaveLength(1);
  });

  it('reads entries appended before the shared encoding (a packed record array in field r)', async () => {
    const { a, prefix } = open();
    const { Redis } = await import('ioredis');
    const { Packr } = await import('msgpackr');
    const raw = new Redis(redisUrl!);
    try {
      await a.open(8);
      await raw.xadd(`${prefix}:cluster:shard:8`, '*', 'r', new Packr({ useRecords: true }).pack([record('old', 1)]));
      expect((await a.read([8], 500)).get(8)![0]!.records).toEqual([record('old', 1)]);
    } finally {
      raw.disconnect();
    }
  });
});

describe.runIf(cluster)('shard keys on a Redis Cluster', () => {
  it("keeps each shard's stream, counts and lease in one slot, and spreads the shards over the masters", async () => {
    const connections = cluster!().connections;
    const keys = new ClusterKeys(connections, 'fctest:keys');
    const client = connections.connect({ name: 'fctest-keyslots', maxRetriesPerRequest: 1 });
    try {
      const slotOf = async (key: string) => Number(await client.call('CLUSTER', 'KEYSLOT', key));
      const masterOf = (slot: number) => (client as Cluster).slots[slot]![0]!;
      const masters = new Set<string>();
      for (let shard = 0; shard < 16; shard++) {
        const slot = await slotOf(keys.shard(shard));
        expect([await slotOf(keys.shardCounts(shard)), await slotOf(keys.lease(shard)), await slotOf(keys.shardAppended(shard))]).toEqual([
          slot,
          slot,
          slot,
        ]);
        masters.add(masterOf(slot));
      }
      expect(masters.size).toBe(3);
      expect(await slotOf(keys.member('a'))).toBe(await slotOf(keys.members));
    } finally {
      client.disconnect();
    }
  });
});

describe.runIf(cluster)('Redis shard log on a Redis Cluster', () => {
  it('finds an entry whose appended message was lost within one blockMs, by asking every shard', async () => {
    const prefix = `fctest:shards:${Math.random().toString(36).slice(2)}`;
    const log = new RedisShardLog(cluster!().connections, prefix, 'owner');
    const raw = cluster!().connections.connect({ name: 'fctest-raw', maxRetriesPerRequest: 1 });
    try {
      for (const shard of [1, 2]) await log.open(shard);
      expect(await log.read([1, 2], 50)).toEqual(new Map());
      // Appended behind the log's back: no `appended` message, as if the subscriber had been reconnecting.
      const packed = upload(record('silent', 1)).bytes;
      await raw.xadd(new ClusterKeys(cluster!().connections, prefix).shard(2), '*', 'p', packed);
      const read = await log.read([1, 2], 400);
      expect(devices(read.get(2) ?? [])).toEqual(['silent']);
    } finally {
      raw.disconnect();
      await log.close();
    }
  });
});

describe('shard keys on one Redis', () => {
  it('keep the names they had before Redis Cluster, so a rolling upgrade finds its streams and leases', () => {
    const keys = new ClusterKeys(redisServer('redis://127.0.0.1:1'), 'p');
    expect([keys.shard(3), keys.shardCounts(3), keys.lease(3), keys.members, keys.member('a')]).toEqual([
      'p:cluster:shard:3',
      'p:cluster:shard:3:organizations',
      'p:cluster:lease:3',
      'p:cluster:members',
      'p:cluster:member:a',
    ]);
  });
});
