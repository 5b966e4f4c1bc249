import type { EncodedPayload } from './encoded-payload.js';

/**
 * The bus carries change records between gateway instances: positions, geofence events, alarms and
 * cartography changes. Delivery is at-most-once (Redis pub/sub semantics); whatever must never be lost
 * (alarms) is stored first and replayed from storage, never from the bus.
 *
 * A bus is typed by its channel map, name → payload (the gateway's is gateway/bus-channels.ts): publish and
 * subscribe take only its channel names, and a subscriber gets the channel's payload type, no cast. The
 * drivers know nothing of the map; on the wire a payload is msgpack (encoded-payload.ts).
 */
export type ChannelMap = object;
/** Any channel name and payload: the drivers' own view, and tests of the drivers. */
export type AnyChannels = Record<string, unknown>;
/** A channel's name in the map `M`. */
export type ChannelOf<M extends ChannelMap> = keyof M & string;

/** The drivers' handlers, untyped: the typed `Bus` interface is where a channel's payload type is known. */
export type BusHandler = (payload: unknown, channel: string) => void;
/** Called when this node may have missed messages; see `Bus.onResync`. */
export type ResyncListener = () => void;

export interface PublishOptions {
  /**
   * A message worth having only now (a live position, superseded by the next within a second or so): while the
   * connection to Redis is away it goes to this node's subscribers only, and the call rejects at once rather than
   * waiting for Redis (an upload that publishes it is never held by an outage).
   */
  live?: boolean;
}

export interface Bus<M extends ChannelMap = AnyChannels> {
  /** Identifies this process in every envelope so it can drop its own echoes. */
  readonly nodeId: string;
  readonly kind: 'local' | 'redis';
  /**
   * Delivers to every subscriber of `channel` on every node, this one included. An `EncodedPayload`
   * (./encoded-payload.ts) is delivered as its value, and goes on the wire as its bytes, packed at most once.
   * While the connection is away a message waits for it, so one sent as Redis returns still reaches the nodes
   * that have resynced already; one marked `live` is refused at once instead (see `PublishOptions`).
   */
  publish<C extends ChannelOf<M>>(channel: C, payload: M[C] | EncodedPayload<M[C]>, options?: PublishOptions): Promise<void>;
  /** Returns the function that removes this subscription. */
  subscribe<C extends ChannelOf<M>>(channel: C, handler: (payload: M[C], channel: C) => void): Promise<() => Promise<void>>;
  /**
   * Registers a listener called whenever this node may have missed messages (the Redis connection dropped and
   * is back, subscriptions restored): every cache kept fresh by bus messages must then be dropped, since the
   * message that would have invalidated it may be gone. Returns the function that removes the listener.
   */
  onResync(listener: ResyncListener): () => void;
  /** Resolves when the bus can carry messages; rejects otherwise (used by /readyz). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Handlers of one node, keyed by channel; shared by both implementations for local delivery. */
export class LocalSubscriptions {
  private readonly handlers = new Map<string, Set<BusHandler>>();

  add(channel: string, handler: BusHandler): { first: boolean } {
    let set = this.handlers.get(channel);
    const first = set === undefined;
    if (!set) this.handlers.set(channel, (set = new Set()));
    set.add(handler);
    return { first };
  }

  remove(channel: string, handler: BusHandler): { last: boolean } {
    const set = this.handlers.get(channel);
    if (!set) return { last: false };
    set.delete(handler);
    if (set.size > 0) return { last: false };
    this.handlers.delete(channel);
    return { last: true };
  }

  /** Handlers run after the publisher's current task, as they would over Redis; one throwing does not stop the others. */
  deliver(channel: string, payload: unknown, onError: (error: unknown) => void): void {
    const set = this.handlers.get(channel);
    if (!set) return;
    for (const handler of [...set]) {
      queueMicrotask(() => {
        try {
          handler(payload, channel);
        } catch (error) {
          onError(error);
        }
      });
    }
  }

  /** The channels with a handler here. */
  channels(): string[] {
    return [...this.handlers.keys()];
  }

  clear(): void {
    this.handlers.clear();
  }
}

/** Resync listeners of one node; a listener throwing does not keep the others from running. */
export class ResyncListeners {
  private readonly listeners = new Set<ResyncListener>();
  /** Times the listeners were called, for tests and metrics. */
  resyncs = 0;

  add(listener: ResyncListener): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  fire(onError: (error: unknown) => void): void {
    this.resyncs += 1;
    for (const listener of [...this.listeners]) {
      try {
        listener();
      } catch (error) {
        onError(error);
      }
    }
  }

  clear(): void {
    this.listeners.clear();
  }
}
