import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { Packr } from 'msgpackr';
import type { Logger } from '../logger.js';
import { LocalSubscriptions, type Bus, type BusHandler } from './bus.js';

/** What travels on a Redis channel: the sender's node id lets every node drop its own echo. */
interface Envelope {
  node: string;
  payload: unknown;
}

// Plain msgpack (no record extension) so any msgpack library can read the bus.
const packr = new Packr({ useRecords: false });

/**
 * Redis pub/sub bus. Publisher and subscriber are separate connections (a subscribed connection can do
 * nothing else); every channel lives under `<prefix>:bus:`. Local subscribers get a message directly,
 * without the round trip, and the echo from Redis is dropped by node id.
 */
export class RedisBus implements Bus {
  readonly nodeId = randomUUID();
  readonly kind = 'redis' as const;
  private readonly publisher: Redis;
  private readonly subscriber: Redis;
  private readonly subscriptions = new LocalSubscriptions();
  private readonly channelPrefix: string;
  /** How our own envelopes begin (map header, "node", our id): an echo is recognised without decoding it. */
  private readonly ownEnvelopeHead: Buffer;

  constructor(url: string, prefix: string, private readonly logger?: Logger) {
    this.channelPrefix = `${prefix}:bus:`;
    const probe = packr.pack({ node: this.nodeId, payload: null } satisfies Envelope);
    this.ownEnvelopeHead = Buffer.from(probe.subarray(0, probe.length - packr.pack(null).length - packr.pack('payload').length));
    const options = { lazyConnect: false, maxRetriesPerRequest: 2, enableOfflineQueue: true } as const;
    // Auto-pipelining sends the publishes of one tick (a burst of uploads) in one write.
    this.publisher = new Redis(url, { ...options, enableAutoPipelining: true, connectionName: `floorcast-bus-pub-${this.nodeId}` });
    this.subscriber = new Redis(url, { ...options, connectionName: `floorcast-bus-sub-${this.nodeId}` });
    for (const connection of [this.publisher, this.subscriber]) {
      connection.on('error', (error) => this.logger?.warn({ err: error }, 'redis bus connection error'));
    }
    this.subscriber.on('messageBuffer', (rawChannel: Buffer, message: Buffer) => this.onMessage(rawChannel, message));
  }

  private onMessage(rawChannel: Buffer, message: Buffer): void {
    // Our own echo: local subscribers already had it, and decoding a large batch only to drop it costs.
    if (message.subarray(0, this.ownEnvelopeHead.length).equals(this.ownEnvelopeHead)) return;
    let envelope: Envelope;
    try {
      envelope = packr.unpack(message) as Envelope;
    } catch (error) {
      this.logger?.warn({ err: error }, 'dropping undecodable bus message');
      return;
    }
    if (envelope.node === this.nodeId) return;
    const channel = rawChannel.toString('utf8').slice(this.channelPrefix.length);
    this.subscriptions.deliver(channel, envelope.payload, (error) => this.logger?.error({ err: error, channel }, 'bus handler failed'));
  }

  async publish(channel: string, payload: unknown): Promise<void> {
    this.subscriptions.deliver(channel, payload, (error) => this.logger?.error({ err: error, channel }, 'bus handler failed'));
    const envelope: Envelope = { node: this.nodeId, payload };
    await this.publisher.publish(this.channelPrefix + channel, packr.pack(envelope));
  }

  async subscribe(channel: string, handler: BusHandler): Promise<() => Promise<void>> {
    const { first } = this.subscriptions.add(channel, handler);
    if (first) await this.subscriber.subscribe(this.channelPrefix + channel);
    return async () => {
      const { last } = this.subscriptions.remove(channel, handler);
      if (last) await this.subscriber.unsubscribe(this.channelPrefix + channel);
    };
  }

  async ping(): Promise<void> {
    await this.publisher.ping();
  }

  async close(): Promise<void> {
    this.subscriptions.clear();
    await Promise.allSettled([this.subscriber.quit(), this.publisher.quit()]);
  }
}
