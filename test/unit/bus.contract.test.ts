import { afterEach, describe, expect, it } from 'vitest';
import { BusInterest } from '../../shared/bus/bus-interest.js';
import { EncodedPayload, type Bus } from '../../shared/bus/index.js';
import { LocalBus } from '../../shared/bus/local-bus.js';
import { RedisBus } from '../../shared/bus/redis-bus.js';
import { busLag } from '../../shared/metrics/metrics.js';
import { FaultRedis } from '../../testkit/fault-servers.js';
import { redisClusterOfThisFile, redisServer } from '../../testkit/redis-cluster.js';
import { deleteRedisPrefix, serverRedisUrl } from '../../testkit/test-environment.js';

/** One contract, run against every bus implementation this run can reach. */
interface BusFactory {
  name: string;
  /** Two nodes sharing one bus, as two gateways would. */
  pair(): { a: Bus; b: Bus; cleanup(): Promise<void> };
}

const factories: BusFactory[] = [
  {
    name: 'local',
    pair: () => {
      const bus = new LocalBus();
      return { a: bus, b: bus, cleanup: () => bus.close() };
    },
  },
];
const redisUrl = serverRedisUrl;
if (redisUrl) {
  factories.push({
    name: 'redis',
    pair: () => {
      const prefix = `fctest:bus:${Math.random().toString(36).slice(2)}`;
      const a = new RedisBus(redisServer(redisUrl), prefix);
      const b = new RedisBus(redisServer(redisUrl), prefix);
      return { a, b, cleanup: async () => (await a.close(), await b.close(), await deleteRedisPrefix(redisUrl, prefix)) };
    },
  });
}
/** A three-master Redis Cluster of this file's own (sharded pub/sub), whatever drivers the run selects. */
const cluster = redisClusterOfThisFile();
if (cluster) {
  factories.push({
    name: 'redis-cluster',
    pair: () => {
      const prefix = `fctest:bus:${Math.random().toString(36).slice(2)}`;
      const a = new RedisBus(cluster().connections, prefix);
      const b = new RedisBus(cluster().connections, prefix);
      return { a, b, cleanup: async () => (await a.close(), await b.close()) };
    },
  });
}

/** The next message on `channel`, once the subscription is acknowledged (a fresh Redis Cluster may take a while). */
async function nextMessage(bus: Bus, channel: string): Promise<{ message: Promise<unknown> }> {
  let resolve!: (payload: unknown) => void;
  const message = new Promise<unknown>((done) => (resolve = done));
  await bus.subscribe(channel, (payload) => resolve(payload));
  return { message };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 150));

describe.each(factories)('bus contract: $name', (factory) => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => cleanup?.());

  it('delivers a published payload to a subscriber on another node, structure intact', async () => {
    const { a, b, cleanup: c } = factory.pair();
    cleanup = c;
    const { message: received } = await nextMessage(b, 'positions');
    await settle();
    const payload = { device: 'd-1', x: 1.5, nested: { list: [1, 'two', null] }, when: '2026-01-01T00:00:00.000Z' };
    await a.publish('positions', payload);
    expect(await received).toEqual(payload);
  });

  it('delivers to local subscribers of the publishing node exactly once', async () => {
    const { a, cleanup: c } = factory.pair();
    cleanup = c;
    const seen: unknown[] = [];
    await a.subscribe('alarms', (payload) => seen.push(payload));
    await settle();
    await a.publish('alarms', { n: 1 });
    await settle();
    expect(seen).toEqual([{ n: 1 }]);
  });

  it('keeps channels apart and stops delivering after unsubscribe', async () => {
    const { a, b, cleanup: c } = factory.pair();
    cleanup = c;
    const seen: string[] = [];
    const unsubscribe = await b.subscribe('one', (payload) => seen.push(`one:${(payload as { n: number }).n}`));
    await b.subscribe('two', (payload) => seen.push(`two:${(payload as { n: number }).n}`));
    await settle();
    await a.publish('one', { n: 1 });
    await a.publish('two', { n: 2 });
    await settle();
    await unsubscribe();
    await settle();
    await a.publish('one', { n: 3 });
    await settle();
    expect(seen.sort()).toEqual(['one:1', 'two:2']);
  });

  it('keeps publish order on one channel', async () => {
    const { a, b, cleanup: c } = factory.pair();
    cleanup = c;
    const seen: number[] = [];
    await b.subscribe('ordered', (payload) => seen.push((payload as { n: number }).n));
    await settle();
    for (let n = 0; n < 50; n++) await a.publish('ordered', { n });
    await settle();
    expect(seen).toEqual(Array.from({ length: 50 }, (_, n) => n));
  });

  it('a throwing handler does not stop other handlers', async () => {
    const { a, b, cleanup: c } = factory.pair();
    cleanup = c;
    await b.subscribe('errors', () => {
      throw new Error('boom');
    });
    const { message: received } = await nextMessage(b, 'errors');
    await settle();
    await a.publish('errors', { ok: true });
    expect(await received).toEqual({ ok: true });
  });

  it('does not signal a resync while connected, and a removed resync listener is not called', async () => {
    const { a, b, cleanup: c } = factory.pair();
    cleanup = c;
    let resyncs = 0;
    const remove = a.onResync(() => resyncs++);
    b.onResync(() => resyncs++);
    remove();
    await a.subscribe('quiet', () => undefined);
    await settle();
    await a.publish('quiet', { n: 1 });
    await settle();
    expect(resyncs).toBe(0);
  });

  it('delivers an encoded payload as its value: the very object on the publishing node, an equal one elsewhere', async () => {
    const { a, b, cleanup: c } = factory.pair();
    cleanup = c;
    const local: unknown[] = [];
    await a.subscribe('positions', (payload) => local.push(payload));
    const { message: remote } = await nextMessage(b, 'positions');
    await settle();
    const value = {
      organizationId: 'org',
      records: [
        { deviceId: 'd1', x: 1.5, userId: null },
        { deviceId: 'd2', x: 2.5, userId: 'u' },
      ],
    };
    const encoded = new EncodedPayload(value);
    await a.publish('positions', encoded);
    expect(await remote).toEqual(value);
    await settle();
    expect(local).toHaveLength(1);
    expect(local[0]).toBe(value);
  });

  it('interest: receives a channel only while held, everything published once the hold resolved, counted by holders', async () => {
    const { a, b, cleanup: c } = factory.pair();
    cleanup = c;
    const seen: number[] = [];
    const interest = new BusInterest(b, (payload) => seen.push((payload as { n: number }).n), 60_000);
    await a.publish('building:1', { n: 1 }); // nobody here holds it
    const first = await interest.hold(['building:1']);
    await a.publish('building:1', { n: 2 }); // at once after the hold resolved: not missed
    const second = await interest.hold(['building:1', 'building:2']);
    first(0);
    await a.publish('building:1', { n: 3 }); // the second holder keeps it
    await a.publish('building:2', { n: 4 });
    await settle(); // what is still on its way when the last holder leaves is dropped with the channel
    second(0); // the last holder left, with no linger: both are given up
    await settle();
    expect(interest.channels).toEqual([]);
    await a.publish('building:1', { n: 5 });
    await a.publish('building:2', { n: 6 });
    // Given back with a linger: still received until it ends, and a hold meanwhile subscribes nothing new.
    (await interest.hold(['building:3']))();
    expect(interest.holds('building:3')).toBe(true);
    await a.publish('building:3', { n: 7 });
    (await interest.hold(['building:3']))(0); // the longest linger asked for stands
    await a.publish('building:3', { n: 8 });
    await settle();
    expect(interest.channels).toEqual(['building:3']);
    expect(seen.sort()).toEqual([2, 3, 4, 7, 8]);
    interest.close();
  });

  it('answers ping while open and refuses after close', async () => {
    const { a, cleanup: c } = factory.pair();
    cleanup = c;
    await expect(a.ping()).resolves.toBeUndefined();
  });
});

describe('encoded payload', () => {
  it('packs once, on first use, and its bytes decode to its value', async () => {
    const { decodePayload } = await import('../../shared/bus/encoded-payload.js');
    const value = { records: [{ deviceId: 'd1', x: 1.5 }] };
    const encoded = new EncodedPayload(value);
    const bytes = encoded.bytes;
    expect(encoded.bytes).toBe(bytes);
    expect(decodePayload(bytes)).toEqual(value);
  });

  it('is never packed by the local bus', async () => {
    const bus = new LocalBus();
    const unpackable = { big: 2n ** 70n }; // msgpack has no integer this large: packing it would throw
    const seen: unknown[] = [];
    await bus.subscribe('c', (payload) => seen.push(payload));
    await bus.publish('c', new EncodedPayload(unpackable));
    await settle();
    await bus.close();
    expect(seen).toEqual([unpackable]);
  });
});

describe.runIf(redisUrl)('Redis bus wire format', () => {
  it('drops a message that is not ours to decode and keeps delivering the next ones', async () => {
    const { Redis } = await import('ioredis');
    const prefix = `fctest:bus:${Math.random().toString(36).slice(2)}`;
    const bus = new RedisBus(redisServer(redisUrl!), prefix);
    const raw = new Redis(redisUrl!);
    try {
      const received: unknown[] = [];
      await bus.subscribe('c', (payload) => void received.push(payload));
      await raw.publish(`${prefix}:bus:c`, Buffer.from('short'));
      await raw.publish(`${prefix}:bus:c`, Buffer.concat([Buffer.from('x'.repeat(36)), Buffer.from([0x92, 0x01])])); // an array of two holding one: truncated
      const other = new RedisBus(redisServer(redisUrl!), prefix);
      await other.publish('c', {
        records: [
          { deviceId: 'd1', x: 1.5 },
          { deviceId: 'd2', x: 2.5 },
        ],
      });
      const encoded = new EncodedPayload({ records: [{ deviceId: 'd3' }] });
      await other.publish('c', encoded);
      await settle();
      await other.close();
      expect(received).toEqual([
        {
          records: [
            { deviceId: 'd1', x: 1.5 },
            { deviceId: 'd2', x: 2.5 },
          ],
        },
        { records: [{ deviceId: 'd3' }] },
      ]);
      // The bytes on the wire after the header are the payload's own, packed once for every other use.
      const sub = new Redis(redisUrl!);
      const wire = new Promise<Buffer>((resolve) => sub.on('messageBuffer', (_channel: Buffer, message: Buffer) => resolve(message)));
      await sub.subscribe(`${prefix}:bus:c`);
      const again = new RedisBus(redisServer(redisUrl!), prefix);
      await again.publish('c', encoded);
      expect((await wire).subarray(44).equals(encoded.bytes)).toBe(true);
      await again.close();
      sub.disconnect();
    } finally {
      raw.disconnect();
      await bus.close();
      await deleteRedisPrefix(redisUrl!, prefix);
    }
  });
});

/** `b`, subscribed, across `restart` of its Redis: one resync once it is back and subscribed again, then messages again. */
async function resyncsAcross(a: Bus, b: Bus, restart: () => Promise<void>): Promise<void> {
  const received: unknown[] = [];
  await b.subscribe('cartography', (payload) => void received.push(payload));
  const resynced = new Promise<void>((resolve) => b.onResync(resolve));
  await restart();
  await resynced;
  // The signal comes after the subscription is restored: what is published now arrives.
  await a.publish('cartography', { after: true });
  await expect.poll(() => received).toEqual([{ after: true }]);
}

/** Always runs: the outage needs a Redis of its own, never the shared one. */
describe('Redis bus across a Redis restart', () => {
  it('signals a resync once it is back and subscribed again, and carries messages again', async () => {
    const redis = await FaultRedis.start();
    const a = new RedisBus(redisServer(redis.url), 'fctest:resync');
    const b = new RedisBus(redisServer(redis.url), 'fctest:resync');
    try {
      await resyncsAcross(a, b, async () => {
        await b.ping();
        await redis.stop();
        await expect
          .poll(() =>
            b.ping().then(
              () => 'up',
              () => 'down',
            ),
          )
          .toBe('down'); // at once, not after Redis returns
        await redis.resume();
      });
    } finally {
      await a.close();
      await b.close();
      await redis.stop();
    }
  });
});

describe('Redis bus lag', () => {
  it('measures how far behind another node a message arrives (floorcast_bus_lag_seconds)', async () => {
    const redis = await FaultRedis.start();
    const a = new RedisBus(redisServer(redis.url), 'fctest:lag');
    const b = new RedisBus(redisServer(redis.url), 'fctest:lag');
    const lagCount = async () =>
      (await busLag.get()).values.find((value) => value.metricName === 'floorcast_bus_lag_seconds_count')?.value ?? 0;
    try {
      const received: unknown[] = [];
      await b.subscribe('alarms', (payload) => void received.push(payload));
      await a.subscribe('alarms', () => undefined);
      const before = await lagCount();
      await a.publish('alarms', { seq: 1 });
      await expect.poll(() => received).toEqual([{ seq: 1 }]);
      // Observed once, by the node that received it from another; the publisher's own echo is not a lag.
      expect(await lagCount()).toBe(before + 1);
    } finally {
      await a.close();
      await b.close();
      await redis.stop();
    }
  });
});

/** Last in this file: it restarts a node of the file's cluster. */
describe.runIf(cluster)('Redis bus across the restart of a Redis Cluster node', () => {
  it("signals a resync once the channel's node is back and subscribed again, and carries messages again", async () => {
    const prefix = `fctest:bus:${Math.random().toString(36).slice(2)}`;
    const a = new RedisBus(cluster!().connections, prefix);
    const b = new RedisBus(cluster!().connections, prefix);
    try {
      await resyncsAcross(a, b, async () => cluster!().restart(await cluster!().masterOf(`${prefix}:bus:cartography`)));
    } finally {
      await a.close();
      await b.close();
    }
  });
});
