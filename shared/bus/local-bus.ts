import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import { busPublishedOn } from '../metrics/metrics.js';
import {
  LocalSubscriptions,
  ResyncListeners,
  type AnyChannels,
  type Bus,
  type BusHandler,
  type ChannelMap,
  type ChannelOf,
  type ResyncListener,
} from './bus.js';
import { payloadValue, type EncodedPayload } from './encoded-payload.js';

/** In-process bus for a single gateway (no Redis configured). Nothing can be lost in process, so it never resyncs. */
export class LocalBus<M extends ChannelMap = AnyChannels> implements Bus<M> {
  readonly nodeId = randomUUID();
  readonly kind = 'local' as const;
  private readonly subscriptions = new LocalSubscriptions();
  private readonly resyncListeners = new ResyncListeners();
  private closed = false;

  constructor(private readonly logger?: Logger) {}

  async publish<C extends ChannelOf<M>>(channel: C, payload: M[C] | EncodedPayload<M[C]>): Promise<void> {
    if (this.closed) throw new Error('bus is closed');
    busPublishedOn(channel).inc();
    this.subscriptions.deliver(channel, payloadValue(payload), (error) =>
      this.logger?.error({ err: error, channel }, 'bus handler failed'),
    );
  }

  async subscribe<C extends ChannelOf<M>>(channel: C, typed: (payload: M[C], channel: C) => void): Promise<() => Promise<void>> {
    // The one place a payload's type is taken on trust: what was published on `channel` under the same map.
    const handler = typed as BusHandler;
    this.subscriptions.add(channel, handler);
    return async () => void this.subscriptions.remove(channel, handler);
  }

  onResync(listener: ResyncListener): () => void {
    return this.resyncListeners.add(listener);
  }

  async ping(): Promise<void> {
    if (this.closed) throw new Error('bus is closed');
  }

  async close(): Promise<void> {
    this.closed = true;
    this.subscriptions.clear();
    this.resyncListeners.clear();
  }
}
