import type { AnyChannels, Bus, ChannelMap, ChannelOf } from './bus.js';

/** Gives a hold back; the channel stays subscribed `lingerMs` more (the holder's default when unset) for a next holder. */
export type ReleaseInterest = (lingerMs?: number) => void;

interface Held {
  holders: number;
  /** Resolves once the bus has acknowledged the subscription (SUBSCRIBE / SSUBSCRIBE answered). */
  subscribed: Promise<() => Promise<void>>;
  /** Unsubscribes at `until` (epoch ms) if nobody holds the channel by then. */
  until: number;
  timer?: NodeJS.Timeout;
}

/**
 * Interest-based subscription, as the sharded Socket.IO and soketi adapters do it: a node subscribes to a channel only
 * while something here needs its messages (a socket following a topic it feeds, a live query, the owner of a shard),
 * reference-counted, and gives it up `lingerMs` after the last holder left, so a topic followed and left in turn does
 * not churn SUBSCRIBE / UNSUBSCRIBE. A hold resolves once the subscription is acknowledged: whatever is published
 * after that reaches `handler`. Works on any driver, through `Bus.subscribe`.
 */
export class BusInterest<M extends ChannelMap = AnyChannels, C extends ChannelOf<M> = ChannelOf<M>> {
  private readonly held = new Map<C, Held>();
  private closed = false;

  constructor(
    private readonly bus: Bus<M>,
    private readonly handler: (payload: M[C], channel: C) => void,
    private readonly lingerMs: number,
  ) {}

  /** Holds every channel of `channels`; resolves once each one is subscribed, to the function giving them back (once). */
  async hold(channels: readonly C[]): Promise<ReleaseInterest> {
    const entries = channels.map((channel) => this.take(channel));
    let released = false;
    const release: ReleaseInterest = (lingerMs = this.lingerMs) => {
      if (released) return;
      released = true;
      for (const channel of channels) this.give(channel, lingerMs);
    };
    try {
      await Promise.all(entries.map((entry) => entry.subscribed));
    } catch (error) {
      release(0);
      throw error;
    }
    return release;
  }

  /** Whether the channel is subscribed here now, or being subscribed (held, or lingering). */
  holds(channel: C): boolean {
    return this.held.has(channel);
  }

  /** Channels subscribed here, held or lingering (metrics, tests). */
  get channels(): C[] {
    return [...this.held.keys()];
  }

  private take(channel: C): Held {
    let entry = this.held.get(channel);
    if (!entry) {
      entry = { holders: 0, until: 0, subscribed: this.bus.subscribe(channel, (payload, name) => this.handler(payload, name)) };
      const failed = entry;
      // A subscription the bus refused is forgotten: the next hold tries again.
      entry.subscribed.catch(() => this.held.get(channel) === failed && this.held.delete(channel));
      this.held.set(channel, entry);
    }
    entry.holders += 1;
    clearTimeout(entry.timer);
    entry.timer = undefined;
    return entry;
  }

  private give(channel: C, lingerMs: number): void {
    const entry = this.held.get(channel);
    if (!entry) return;
    entry.holders -= 1;
    entry.until = Math.max(entry.until, Date.now() + lingerMs);
    if (entry.holders > 0) return;
    this.schedule(channel, entry);
  }

  private schedule(channel: C, entry: Held): void {
    clearTimeout(entry.timer);
    const wait = entry.until - Date.now();
    if (wait > 0 && !this.closed) {
      entry.timer = setTimeout(() => this.schedule(channel, entry), wait);
      entry.timer.unref();
      return;
    }
    if (entry.holders > 0 || this.held.get(channel) !== entry) return;
    this.held.delete(channel);
    void entry.subscribed.then((unsubscribe) => unsubscribe()).catch(() => undefined);
  }

  /** Stops the linger timers (the bus itself is closed by its owner). */
  close(): void {
    this.closed = true;
    for (const entry of this.held.values()) clearTimeout(entry.timer);
    this.held.clear();
  }
}
