import { EncodedPayload } from '../../shared/bus/index.js';
import type { Bus } from '../bus-channels.js';
import type { Logger } from '../../shared/logger.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { PositionStore } from '../../shared/positions/position-store.js';
import { PositionsMessage, type EncodedPositions } from '../../shared/positions/positions-message.js';
import { positionsByShard } from '../cluster/rendezvous.js';
import type { LivePositions } from '../pipeline/ports.js';
import type { BuildingRegistry } from './building-registry.js';
import { toFeature, type PositionFeature } from './geojson.js';
import { LiveState, type LiveQuery } from './live-state.js';
import { PositionInterest, positionsChannel } from './position-interest.js';

export type PositionListener = (records: readonly PositionRecord[]) => void;

export interface RealtimeOptions {
  liveTtlSeconds: number;
  retentionDays: number;
  /** CLUSTER_SHARDS: positions travel on one bus channel per shard. */
  shards: number;
  /** BUS_INTEREST_LINGER_MS: how long a shard's channel stays subscribed after the last socket needing it left. */
  interestLingerMs: number;
}

/**
 * The live side of positions on this gateway: the batches accepted here, and those accepted by the others in the
 * shards this gateway has an interest in (position-interest.ts), update the live state and reach the listeners
 * (the WebSocket hub, evacuation arrivals). Also runs the periodic upkeep: forgetting silent devices and dropping
 * history past retention.
 *
 * So the live state holds every position only on a lone gateway. With several, a live query takes an interest in
 * the shards it reads and keeps it for LIVE_POSITION_TTL_SECONDS after it (a screen polling it keeps it warm); the
 * first one after a while without answers with what arrived since, as a gateway just started does.
 */
export class RealtimeService implements LivePositions {
  readonly live = new LiveState();
  readonly interest: PositionInterest;
  private readonly listeners: PositionListener[] = [];
  /** Messages published here: the bus hands them back to this gateway's own subscription, already applied. */
  private readonly own = new WeakSet<PositionsMessage>();
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly bus: Bus,
    private readonly registry: BuildingRegistry,
    private readonly store: PositionStore,
    private readonly options: RealtimeOptions,
    private readonly logger: Logger,
  ) {
    this.interest = new PositionInterest(
      bus,
      options.shards,
      (message) => this.own.has(message) || this.onPositions(message),
      options.interestLingerMs,
    );
  }

  async start(): Promise<void> {
    this.timers.push(setInterval(() => this.live.evictOlderThan(Date.now() - this.options.liveTtlSeconds * 1000), 30_000).unref());
    if (this.options.retentionDays > 0) {
      const sweep = () =>
        this.store
          .dropPartitionsOlderThan(this.options.retentionDays)
          .catch((error) => this.logger.warn({ err: error }, 'retention sweep failed'));
      this.timers.push(setInterval(sweep, 3600_000).unref());
      void sweep();
    }
  }

  /**
   * A batch accepted here: into the live state and to the listeners at once, then on the bus, one message per shard
   * on the shard's channel, to the gateways interested in it. The bus hands this gateway's own subscription the very
   * message published (bus.ts), which is recognised and dropped: a batch may hold several fixes of one device with
   * one timestamp, so applying them again would push them again.
   */
  async publish(organizationId: string, records: PositionRecord[]): Promise<ReadonlyMap<number, EncodedPositions>> {
    this.onPositions(new PositionsMessage(organizationId, records));
    const published = new Map<number, EncodedPositions>();
    for (const [shard, list] of positionsByShard(records, this.options.shards)) {
      const message = new PositionsMessage(organizationId, list);
      this.own.add(message);
      published.set(shard, new EncodedPayload(message));
    }
    // Live: while Redis is away the other gateways' screens miss these, but the upload does not wait for Redis.
    await Promise.all([...published].map(([shard, message]) => this.bus.publish(positionsChannel(shard), message, { live: true })));
    return published;
  }

  onPositions(message: PositionsMessage): void {
    const fresh = message.records.filter((record) => this.live.apply(record));
    if (fresh.length === 0) return;
    for (const listener of this.listeners) {
      try {
        listener(fresh);
      } catch (error) {
        this.logger.error({ err: error }, 'position listener failed');
      }
    }
  }

  onFreshPositions(listener: PositionListener): void {
    this.listeners.push(listener);
  }

  /** Live positions as GeoJSON features, with each floor's level height. */
  async features(query: Omit<LiveQuery, 'since'>, maxAgeSeconds = this.options.liveTtlSeconds): Promise<PositionFeature[]> {
    const records = await this.query({ ...query, since: Date.now() - maxAgeSeconds * 1000 });
    return Promise.all(records.map(async (record) => toFeature(record, await this.levelHeightOf(record))));
  }

  /**
   * A live query: the live state, with an interest in the shards of its buildings kept for the live TTL after it.
   * While the bus refuses (Redis away) it answers with what the live state holds.
   */
  async query(query: LiveQuery): Promise<PositionRecord[]> {
    await this.interest.holdBuildings(query.buildingIds).then(
      (release) => release(this.options.liveTtlSeconds * 1000),
      (error: unknown) => this.logger.warn({ err: error }, 'subscribing to live positions failed; answering with those held here'),
    );
    return this.live.query(query);
  }

  async levelHeightOf(record: PositionRecord): Promise<number | null> {
    if (record.buildingId === null || record.floorId === null) return null;
    const runtime = await this.registry.get(record.organizationId, record.buildingId);
    return runtime?.floors.get(record.floorId)?.levelHeight ?? null;
  }

  stop(): void {
    this.interest.close();
    for (const timer of this.timers) clearInterval(timer);
  }
}
