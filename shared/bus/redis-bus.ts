import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import { busLag, busPublishedOn, busReceivedOn } from '../metrics/metrics.js';
import {
  LocalSubscriptions,
  ResyncListeners,
  type AnyChannels,
  type Bus,
  type BusHandler,
  type ChannelMap,
  type ChannelOf,
  type PublishOptions,
  type ResyncListener,
} from './bus.js';
import type { RedisClient, RedisConnections } from '../redis/redis-connections.js';
import { decodePayload, encodePayload, payloadValue, type EncodedPayload } from './encoded-payload.js';

/**
 * What travels on a Redis channel: the sender's node id (a UUID, 36 ASCII bytes), so every node drops its own
 * echo without decoding it; the time it was published (a float64 of epoch milliseconds, 8 bytes), so a receiver
 * can tell how far behind the bus runs; then the payload in msgpack (./encoded-payload.ts), packed once for an
 * `EncodedPayload` whatever else carries its bytes.
 */
const NODE_ID_BYTES = 36;
const HEADER_BYTES = NODE_ID_BYTES + 8;

/**
 * Redis pub/sub bus. Publisher and subscriber are separate connections (a subscribed connection can do
 * nothing else); every channel lives under `<prefix>:bus:`. Local subscribers get a message directly,
 * without the round trip, and the echo from Redis is dropped by node id.
 *
 * On a Redis Cluster it is sharded pub/sub (SPUBLISH / SSUBSCRIBE, Redis 7): a channel lives on the node of its
 * slot, so each message crosses one node instead of every node of the cluster as PUBLISH would.
 */
export class RedisBus<M extends ChannelMap = AnyChannels> implements Bus<M> {
  readonly nodeId = randomUUID();
  readonly kind = 'redis' as const;
  private readonly publisher: RedisClient;
  private readonly subscriber: RedisClient;
  private readonly sharded: boolean;
  private readonly subscriptions = new LocalSubscriptions();
  private readonly channelPrefix: string;
  private readonly nodeIdBytes: Buffer;
  private readonly resyncListeners = new ResyncListeners();
  private subscriberWasReady = false;
  /** Cluster: a sharded subscriber was lost (its node went away) and our channels are not known to be back. */
  private shardLost = false;
  private restoring = false;
  private closing = false;

  constructor(
    redis: RedisConnections,
    prefix: string,
    private readonly logger?: Logger,
  ) {
    this.channelPrefix = `${prefix}:bus:`;
    this.nodeIdBytes = Buffer.from(this.nodeId, 'latin1');
    if (this.nodeIdBytes.length !== NODE_ID_BYTES) throw new Error('node ids are UUIDs');
    this.sharded = redis.clustered;
    // Auto-pipelining sends the publishes of one tick (a burst of uploads) in one write.
    // It keeps its offline queue: a cache invalidation sent as Redis returns must reach the nodes that resynced before.
    this.publisher = redis.connect({
      name: `floorcast-bus-pub-${this.nodeId}`,
      maxRetriesPerRequest: 2,
      enableAutoPipelining: true,
      queueWhileAway: true,
    });
    this.subscriber = redis.connect({ name: `floorcast-bus-sub-${this.nodeId}`, maxRetriesPerRequest: 2, subscriber: true });
    for (const connection of [this.publisher, this.subscriber]) {
      connection.on('error', (error) => this.logger?.warn({ err: error }, 'redis bus connection error'));
    }
    this.subscriber.on(this.sharded ? 'smessageBuffer' : 'messageBuffer', (rawChannel: Buffer, message: Buffer) =>
      this.onMessage(rawChannel, message),
    );
    if (this.sharded) {
      this.subscriber.on('-subscriber', () => (this.shardLost = true));
      this.subscriber.on('subscribersReady', () => void this.onShardedSubscribersReady());
    } else this.subscriber.on('ready', () => this.onSubscriberReady());
  }

  /**
   * 'ready' after the first one means the subscriber reconnected: whatever was published while it was away is
   * lost. ioredis re-sends SUBSCRIBE for every channel on reconnection; a PING queued behind them answers once
   * Redis has processed them, so a cache reloaded after the signal cannot miss a later change.
   */
  private onSubscriberReady(): void {
    if (!this.subscriberWasReady) {
      this.subscriberWasReady = true;
      return;
    }
    this.logger?.warn('redis bus reconnected: dropping caches kept by bus messages');
    this.subscriber.ping().then(
      () => this.fireResync(),
      () => this.fireResync(),
    );
  }

  /**
   * Cluster: ioredis drops the sharded subscriber of a node that went away ('-subscriber') and says
   * 'subscribersReady' each time it has rebuilt them, also while that node is still down. Once every channel of
   * ours is subscribed again (SSUBSCRIBE answered: the node has it), whatever was published meanwhile is lost:
   * resync. Until then, the next 'subscribersReady' tries again.
   */
  private async onShardedSubscribersReady(): Promise<void> {
    if (!this.shardLost || this.restoring || this.closing) return;
    this.shardLost = false;
    this.restoring = true;
    let timer: NodeJS.Timeout | undefined;
    try {
      const channels = this.subscriptions.channels().map((channel) => this.channelPrefix + channel);
      await Promise.race([
        Promise.all(channels.map((channel) => this.subscriber.ssubscribe(channel))),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('SSUBSCRIBE timed out')), 2000))),
      ]);
      this.logger?.warn('redis bus sharded subscribers reconnected: dropping caches kept by bus messages');
      this.fireResync();
    } catch {
      this.shardLost = true;
    } finally {
      clearTimeout(timer);
      this.restoring = false;
    }
  }

  private fireResync(): void {
    if (!this.closing) this.resyncListeners.fire((error) => this.logger?.error({ err: error }, 'bus resync listener failed'));
  }

  /** How many times this node resynced since it started (visible to metrics). */
  get resyncs(): number {
    return this.resyncListeners.resyncs;
  }

  private onMessage(rawChannel: Buffer, message: Buffer): void {
    // Our own echo: local subscribers already had it.
    if (message.subarray(0, NODE_ID_BYTES).equals(this.nodeIdBytes)) return;
    let payload: unknown;
    try {
      if (message.length < HEADER_BYTES) throw new Error('bus message shorter than its header');
      busLag.observe(Math.max(0, Date.now() - message.readDoubleBE(NODE_ID_BYTES)) / 1000);
      payload = decodePayload(message.subarray(HEADER_BYTES));
    } catch (error) {
      this.logger?.warn({ err: error }, 'dropping undecodable bus message');
      return;
    }
    const channel = rawChannel.toString('utf8').slice(this.channelPrefix.length);
    busReceivedOn(channel).inc();
    this.subscriptions.deliver(channel, payload, (error) => this.logger?.error({ err: error, channel }, 'bus handler failed'));
  }

  async publish<C extends ChannelOf<M>>(channel: C, payload: M[C] | EncodedPayload<M[C]>, options?: PublishOptions): Promise<void> {
    busPublishedOn(channel).inc();
    this.subscriptions.deliver(channel, payloadValue(payload), (error) =>
      this.logger?.error({ err: error, channel }, 'bus handler failed'),
    );
    if (options?.live && this.publisher.status !== 'ready')
      throw new Error(`the bus is away (${this.publisher.status}): live message not sent`);
    const sentAt = Buffer.allocUnsafe(8);
    sentAt.writeDoubleBE(Date.now());
    const message = Buffer.concat([this.nodeIdBytes, sentAt, encodePayload(payload)]);
    if (this.sharded) await this.publisher.spublish(this.channelPrefix + channel, message);
    else await this.publisher.publish(this.channelPrefix + channel, message);
  }

  async subscribe<C extends ChannelOf<M>>(channel: C, typed: (payload: M[C], channel: C) => void): Promise<() => Promise<void>> {
    // The one place a payload's type is taken on trust: what was published on `channel` under the same map.
    const handler = typed as BusHandler;
    const { first } = this.subscriptions.add(channel, handler);
    const redisChannel = this.channelPrefix + channel;
    if (first) await (this.sharded ? this.subscriber.ssubscribe(redisChannel) : this.subscriber.subscribe(redisChannel));
    return async () => {
      const { last } = this.subscriptions.remove(channel, handler);
      if (last) await (this.sharded ? this.subscriber.sunsubscribe(redisChannel) : this.subscriber.unsubscribe(redisChannel));
    };
  }

  onResync(listener: ResyncListener): () => void {
    return this.resyncListeners.add(listener);
  }

  /** Refuses at once while the connection is lost (a PING would otherwise wait for Redis in the offline queue). */
  async ping(): Promise<void> {
    if (['reconnecting', 'close', 'end'].includes(this.publisher.status))
      throw new Error(`redis is unreachable (${this.publisher.status})`);
    await this.publisher.ping();
  }

  async close(): Promise<void> {
    this.closing = true;
    this.subscriptions.clear();
    this.resyncListeners.clear();
    // Bounded: QUIT waits in the offline queue while Redis is away; then the connections are just dropped.
    await Promise.race([
      Promise.allSettled([this.subscriber.quit(), this.publisher.quit()]),
      new Promise((resolve) => setTimeout(resolve, 2000).unref()),
    ]);
    this.subscriber.disconnect();
    this.publisher.disconnect();
  }
}
