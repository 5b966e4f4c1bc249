import { afterEach, describe, expect, it } from 'vitest';
import { ClusterNode } from '../../../gateway/cluster/cluster-node.js';
import type { ShardHandler } from '../../../gateway/cluster/shard-handler.js';
import type { Coordination } from '../../../gateway/cluster/coordination.js';
import { LocalShardLog } from '../../../gateway/cluster/local-shard-log.js';
import { RedisCoordination } from '../../../gateway/cluster/redis-coordination.js';
import { RedisShardLog } from '../../../gateway/cluster/redis-shard-log.js';
import { ownerOf } from '../../../gateway/cluster/rendezvous.js';
import { EncodedPayload } from '../../../shared/bus/encoded-payload.js';
import { PositionsMessage } from '../../../shared/positions/positions-message.js';
import { createLogger } from '../../../shared/logger.js';
import type { RedisConnections } from '../../../shared/redis/redis-connections.js';
import { redisClusterOfThisFile, redisServer } from '../../../testkit/redis-cluster.js';
import { deleteRedisPrefix, serverRedisUrl } from '../../../testkit/test-environment.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A coordination whose leases can be taken away, as an expiry during a Redis outage would. */
class FakeCoordination implements Coordination {
  leasesKept = true;
  constructor(readonly memberId: string) {}
  async heartbeat() {
    return [this.memberId];
  }
  async acquire() {
    return this.leasesKept;
  }
  async renew(shards: readonly number[]) {
    return shards.map(() => this.leasesKept);
  }
  async release() {}
  async leave() {}
  async close() {}
}

function recorder() {
  const events: string[] = [];
  const handler: ShardHandler = {
    gain: async (shard) => void events.push(`gain ${shard}`),
    lose: (shard) => void events.push(`lose ${shard}`),
    process: async (shard, entries, holds) => {
      events.push(`process ${shard} ${holds() ? 'held' : 'fenced'} ${entries.map((entry) => entry.records[0]!.deviceId).join(',')}`);
      return true;
    },
    stored: async () => true,
    buildingsIn: () => 0,
  };
  return { events, handler };
}

const record = (deviceId: string) => ({
  organizationId: 'org',
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

describe('ClusterNode: lease fencing', () => {
  it('rebuilds a shard before processing its entries, and stops processing it once its lease is lost', async () => {
    const coordination = new FakeCoordination('only');
    const log = new LocalShardLog();
    const { events, handler } = recorder();
    const node = new ClusterNode(coordination, log, handler, { shards: 1, heartbeatMs: 50, ttlMs: 150 }, createLogger('silent'));
    await node.handOff([record('before-start')]);
    await node.start();
    for (let attempt = 0; attempt < 50 && node.readyShards.length === 0; attempt++) await sleep(20);
    await node.handOff([record('live')]);
    for (let attempt = 0; attempt < 50 && !events.some((event) => event.includes('live')); attempt++) await sleep(20);
    expect(events.slice(0, 3)).toEqual(['gain 0', 'process 0 held before-start', 'process 0 held live']);
    coordination.leasesKept = false; // renewals fail from now on: the lease lapses
    for (let attempt = 0; attempt < 50 && !events.includes('lose 0'); attempt++) await sleep(20);
    expect(node.holds(0)).toBe(false);
    expect(node.ownsBuilding(1)).toBe(false);
    await node.handOff([record('after-loss')]);
    await sleep(200);
    expect(events.filter((event) => event.includes('after-loss'))).toEqual([]);
    await node.stop();
  });
});

describe('ClusterNode: hand-off while the shard log refuses', () => {
  it('keeps refused batches in order and appends them, before later ones, once the log takes them again', async () => {
    const log = new LocalShardLog();
    let refusing = true;
    const append = log.append.bind(log);
    log.append = async (shard, records) => (refusing ? Promise.reject(new Error('redis is down')) : append(shard, records));
    const { events, handler } = recorder();
    const node = new ClusterNode(
      new FakeCoordination('only'),
      log,
      handler,
      { shards: 1, heartbeatMs: 50, ttlMs: 150 },
      createLogger('silent'),
    );
    await node.handOff([record('first')]); // resolves: the upload is acknowledged, its positions being stored
    await node.handOff([record('second')]);
    expect(node.waitingRecords).toBe(2);
    refusing = false;
    await node.handOff([record('third')]); // queued behind the waiting ones, not ahead of them
    await node.start();
    for (let attempt = 0; attempt < 50 && !events.some((event) => event.includes('third')); attempt++) await sleep(20);
    expect(events.filter((event) => event.startsWith('process')).join(' ')).toMatch(/first.*second.*third/);
    expect(node.waitingRecords).toBe(0);
    await node.stop();
  });
});

/** The Redis drivers run against this run's Redis, if any, and a three-master Redis Cluster of this file's own. */
interface RedisTarget {
  name: string;
  connections(): RedisConnections;
  /** Removes a test's keys (the cluster is thrown away whole at the end). */
  clean(prefix: string): Promise<void>;
}
const targets: RedisTarget[] = [];
if (serverRedisUrl)
  targets.push({
    name: 'redis',
    connections: () => redisServer(serverRedisUrl!),
    clean: (prefix) => deleteRedisPrefix(serverRedisUrl!, prefix),
  });
const redisCluster = redisClusterOfThisFile();
if (redisCluster) targets.push({ name: 'redis-cluster', connections: () => redisCluster().connections, clean: async () => undefined });

describe.runIf(targets.length > 0).each(targets)('RedisCoordination: membership and leases ($name)', (target) => {
  const prefix = `fctest:coord:${Math.random().toString(36).slice(2)}`;
  const members: RedisCoordination[] = [];
  const member = (id: string, ttlMs = 400) => {
    const made = new RedisCoordination(target.connections(), prefix, id, ttlMs);
    members.push(made);
    return made;
  };
  afterEach(async () => {
    for (const made of members.splice(0)) await made.close();
    await target.clean(prefix);
  });

  it('lists live members, forgets one whose heartbeat expired and one that left', async () => {
    const [a, b, c] = [member('a'), member('b'), member('c')];
    await b.heartbeat();
    await c.heartbeat();
    expect(await a.heartbeat()).toEqual(['a', 'b', 'c']);
    await c.leave();
    expect(await a.heartbeat()).toEqual(['a', 'b']);
    await sleep(500); // b's heartbeat expires
    expect(await a.heartbeat()).toEqual(['a']);
  });

  it('lets one member hold a lease: the other takes it only once released or expired', async () => {
    const [a, b] = [member('a'), member('b')];
    expect(await a.acquire(4)).toBe(true);
    expect(await b.acquire(4)).toBe(false);
    expect(await b.renew([4])).toEqual([false]);
    expect(await a.renew([4])).toEqual([true]);
    await a.release(4);
    expect(await b.acquire(4)).toBe(true);
    await a.release(4); // not a's any more: nothing happens
    expect(await a.acquire(4)).toBe(false);
    await sleep(500); // b stops renewing: its lease expires
    expect(await a.acquire(4)).toBe(true);
    expect(await b.renew([4])).toEqual([false]);
  });
});

/** Leases and membership shared by members in one process. */
class SharedCoordination implements Coordination {
  constructor(
    readonly memberId: string,
    private readonly cluster: { members: string[]; leases: Map<number, string> },
  ) {}
  async heartbeat() {
    return [...this.cluster.members].sort();
  }
  async acquire(shard: number) {
    const holder = this.cluster.leases.get(shard) ?? this.memberId;
    this.cluster.leases.set(shard, holder);
    return holder === this.memberId;
  }
  async renew(shards: readonly number[]) {
    return shards.map((shard) => this.cluster.leases.get(shard) === this.memberId);
  }
  async release(shard: number) {
    if (this.cluster.leases.get(shard) === this.memberId) this.cluster.leases.delete(shard);
  }
  async leave() {}
  async close() {}
}

describe.runIf(targets.length > 0).each(targets)('ClusterNode: a shard handed to a joining member (Redis streams, $name)', (target) => {
  const prefix = `fctest:handover:${Math.random().toString(36).slice(2)}`;
  afterEach(async () => target.clean(prefix));

  it('loses no entry appended as the next owner starts reading: the old owner releases the lease once its read is over', async () => {
    // One shard, which the joining member wins from the first.
    const first = 'member-a';
    const second = ['member-b', 'member-c', 'member-d', 'member-e'].find((id) => ownerOf(0, [first, id]) === id)!;
    const cluster = { members: [first], leases: new Map<number, string>() };
    const upload = (deviceId: string) => appender.append(0, new EncodedPayload(new PositionsMessage('org', [record(deviceId)])));
    const appender = new RedisShardLog(target.connections(), prefix, 'uploads');
    // The first member's reads of the stream block for long (as a read under way when a heartbeat finds the shard
    // is another's), so one is always under way when it gives the shard up.
    const firstLog = new RedisShardLog(target.connections(), prefix, first);
    const read = firstLog.read.bind(firstLog);
    firstLog.read = (shards) => read(shards, 3000);
    // An upload lands in the shard as soon as the next owner has taken what was left pending.
    const secondLog = new RedisShardLog(target.connections(), prefix, second);
    const takePending = secondLog.takePending.bind(secondLog);
    secondLog.takePending = async (shard) => {
      const pending = await takePending(shard);
      await upload('at-hand-over');
      return pending;
    };
    const recorders = [recorder(), recorder()];
    const member = (id: string, log: RedisShardLog, index: number, heartbeatMs: number) => {
      const options = { shards: 1, heartbeatMs, ttlMs: 60_000 };
      return new ClusterNode(new SharedCoordination(id, cluster), log, recorders[index]!.handler, options, createLogger('silent'));
    };
    const nodes = [member(first, firstLog, 0, 100), member(second, secondLog, 1, 50)];
    try {
      await nodes[0]!.start();
      await upload('before');
      for (let attempt = 0; attempt < 200 && !recorders[0]!.events.some((event) => event.includes('before')); attempt++) await sleep(20);
      cluster.members = [first, second];
      await nodes[1]!.start();
      const handedOver = () => recorders[1]!.events.some((event) => event.includes('at-hand-over'));
      for (let attempt = 0; attempt < 400 && !handedOver(); attempt++) await sleep(20);
      expect(recorders[0]!.events.filter((event) => event.startsWith('process'))).toEqual(['process 0 held before']);
      expect(recorders[1]!.events).toEqual(['gain 0', 'process 0 held at-hand-over']);
    } finally {
      for (const node of nodes) await node.stop();
      await appender.close();
    }
  });
});
