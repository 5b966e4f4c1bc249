import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { RedisShardLog } from '../gateway/cluster/redis-shard-log.js';
import { EncodedPayload } from '../shared/bus/encoded-payload.js';
import { RedisBus } from '../shared/bus/redis-bus.js';
import { PositionsMessage } from '../shared/positions/positions-message.js';
import type { RedisConnections } from '../shared/redis/redis-connections.js';
import { FaultRedis } from '../testkit/fault-servers.js';
import { redisClusterSkipReason, redisServer, startRedisCluster } from '../testkit/redis-cluster.js';
import { positionRecord } from '../testkit/positions.js';
import { median, type Figure, type Scenario } from './harness.js';

const SCENARIO = 'redis-cluster';
const numberFrom = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const MESSAGES = numberFrom('BENCH_CLUSTER_MESSAGES', 20_000);
const SUBSCRIBERS = numberFrom('BENCH_CLUSTER_SUBSCRIBERS', 3);
const CHANNELS = numberFrom('BENCH_CLUSTER_CHANNELS', 64);
const ENTRIES = numberFrom('BENCH_CLUSTER_ENTRIES', 10_000);
const SHARDS = numberFrom('BENCH_CLUSTER_SHARDS', 16);
/** Rounds of both targets back to back (the order alternating): each figure is the median over them. */
const ROUNDS = numberFrom('BENCH_CLUSTER_ROUNDS', 3);
/** Publishes or appends in flight at once (a gateway's burst of uploads). */
const WINDOW = 256;
/** Positions per bus message and per stream entry (one upload's worth in a shard). */
const RECORDS = 20;

const log = (line: string) => process.stdout.write(`  ${SCENARIO}: ${line}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const upload = (index: number) =>
  new PositionsMessage(
    'org',
    Array.from({ length: RECORDS }, (_, n) =>
      positionRecord({ deviceId: `d${index}-${n}`, x: n, y: index % 100, timestamp: 1_700_000_000_000 + index }),
    ),
  );

/** Runs `task(i)` for i < count with at most WINDOW in flight. */
async function windowed(count: number, task: (index: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(WINDOW, count) }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

/**
 * Live fan-out as gateways do it: one publisher node, SUBSCRIBERS nodes each subscribed to CHANNELS channels
 * (buildings), MESSAGES messages of RECORDS positions spread over the channels. Messages delivered per second:
 * from the first publish until every subscriber has every message.
 */
async function busFanOut(connections: RedisConnections): Promise<number> {
  const prefix = `fcbench:bus:${randomBytes(4).toString('hex')}`;
  const publisher = new RedisBus(connections, prefix);
  const subscribers = Array.from({ length: SUBSCRIBERS }, () => new RedisBus(connections, prefix));
  let received = 0;
  let done: () => void = () => undefined;
  const expected = (count: number) => new Promise<void>((resolve) => (done = () => received >= count && resolve()));
  try {
    for (const subscriber of subscribers)
      for (let channel = 0; channel < CHANNELS; channel++) await subscriber.subscribe(`building-${channel}`, () => (received++, done()));
    await sleep(300);
    const payloads = Array.from({ length: CHANNELS }, (_, channel) => new EncodedPayload(upload(channel)));
    // Warm-up: connections made, scripts and paths hot.
    let all = expected(SUBSCRIBERS * 500);
    await windowed(500, (index) => publisher.publish(`building-${index % CHANNELS}`, payloads[index % CHANNELS]!));
    await all;
    received = 0;
    all = expected(SUBSCRIBERS * MESSAGES);
    const started = performance.now();
    await windowed(MESSAGES, (index) => publisher.publish(`building-${index % CHANNELS}`, payloads[index % CHANNELS]!));
    await all;
    return (SUBSCRIBERS * MESSAGES) / ((performance.now() - started) / 1000);
  } finally {
    await Promise.all([publisher, ...subscribers].map((bus) => bus.close()));
  }
}

/**
 * The hand-off from accepting gateways to a building's owner: ENTRIES uploads appended over SHARDS shards while
 * one owner reads, and acknowledges, every shard. Entries per second: from the first append to the last ack.
 */
async function shardHandOff(connections: RedisConnections): Promise<number> {
  const prefix = `fcbench:shards:${randomBytes(4).toString('hex')}`;
  const appender = new RedisShardLog(connections, prefix, 'appender');
  const owner = new RedisShardLog(connections, prefix, 'owner');
  const shards = Array.from({ length: SHARDS }, (_, shard) => shard);
  const entries = Array.from({ length: 64 }, (_, index) => new EncodedPayload(upload(index)));
  try {
    for (const shard of shards) await owner.open(shard);
    let acknowledged = 0;
    const started = performance.now();
    const reading = (async () => {
      while (acknowledged < ENTRIES) {
        const read = await owner.read(shards, 100);
        await Promise.all(
          [...read].map(([shard, got]) =>
            owner.ack(
              shard,
              got.map((entry) => entry.id),
            ),
          ),
        );
        for (const [, got] of read) acknowledged += got.length;
      }
    })();
    await windowed(ENTRIES, (index) => appender.append(index % SHARDS, entries[index % entries.length]!));
    await reading;
    return ENTRIES / ((performance.now() - started) / 1000);
  } finally {
    await appender.close();
    await owner.close();
  }
}

/**
 * Issue 33: the bus and the shard hand-off on one Redis and on a three-master Redis Cluster, both started here
 * (private servers on free ports, killed at the end), measured in one sitting. Everything runs on this one
 * machine: the cluster's three servers share its cores with the bench, so the ratio shows what sharded pub/sub
 * and per-shard stream reads cost, not the capacity more machines would add.
 */
export const redisClusterScenario: Scenario = {
  name: SCENARIO,
  async run(): Promise<Figure[]> {
    if (redisClusterSkipReason) {
      log(`skipped: ${redisClusterSkipReason}`);
      return [];
    }
    const figures: Figure[] = [];
    const add = (figure: Omit<Figure, 'scenario'>) => figures.push({ scenario: SCENARIO, ...figure });
    const single = await FaultRedis.start();
    const cluster = await startRedisCluster();
    try {
      const targets = [
        ['one Redis', redisServer(single.url)],
        ['Redis Cluster (3 masters)', cluster.connections],
      ] as const;
      const fanOut = new Map<string, number[]>(targets.map(([name]) => [name, []]));
      const handOff = new Map<string, number[]>(targets.map(([name]) => [name, []]));
      const ratios = { fanOut: [] as number[], handOff: [] as number[] };
      for (let round = 0; round < ROUNDS; round++) {
        const measured = new Map<string, { fanOut: number; handOff: number }>();
        for (const [name, connections] of round % 2 === 0 ? targets : [...targets].reverse()) {
          const figures = { fanOut: await busFanOut(connections), handOff: await shardHandOff(connections) };
          measured.set(name, figures);
          fanOut.get(name)!.push(figures.fanOut);
          handOff.get(name)!.push(figures.handOff);
          log(
            `round ${round + 1}, ${name}: bus fan-out ${Math.round(figures.fanOut)} messages/s, hand-off ${Math.round(figures.handOff)} entries/s`,
          );
        }
        const [one, clustered] = targets.map(([name]) => measured.get(name)!);
        ratios.fanOut.push(clustered!.fanOut / one!.fanOut);
        ratios.handOff.push(clustered!.handOff / one!.handOff);
      }
      const spread = (values: number[]) => `${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)}`;
      for (const [name] of targets) {
        add({
          metric: `bus fan-out, ${name} (${SUBSCRIBERS} subscribers, ${CHANNELS} channels)`,
          value: median(fanOut.get(name)!),
          unit: 'messages/s',
        });
        add({
          metric: `shard hand-off, ${name} (${SHARDS} shards, append + read + ack)`,
          value: median(handOff.get(name)!),
          unit: 'entries/s',
        });
      }
      add({
        metric: `bus fan-out, cluster / one Redis (median of ${ROUNDS} rounds, ${spread(ratios.fanOut)})`,
        value: median(ratios.fanOut),
        unit: '×',
      });
      add({
        metric: `shard hand-off, cluster / one Redis (median of ${ROUNDS} rounds, ${spread(ratios.handOff)})`,
        value: median(ratios.handOff),
        unit: '×',
      });
      return figures;
    } finally {
      await cluster.stop();
      await single.stop();
    }
  },
};
