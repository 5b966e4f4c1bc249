import type { Bus } from '../bus-channels.js';
import type { Logger } from '../../shared/logger.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { PositionStore } from '../../shared/positions/position-store.js';
import type { PositionsMessage } from '../../shared/positions/positions-message.js';
import type { BuildingRegistry } from './building-registry.js';
import { toFeature, type PositionFeature } from './geojson.js';
import { LiveState, type LiveQuery } from './live-state.js';

export type PositionListener = (records: readonly PositionRecord[]) => void;

/**
 * The live side of positions on this gateway: every accepted batch, from any gateway, arrives on the bus,
 * updates the live state and reaches the listeners (the WebSocket hub). Also runs the periodic upkeep:
 * forgetting silent devices and dropping history past retention.
 */
export class RealtimeService {
  readonly live = new LiveState();
  private readonly listeners: PositionListener[] = [];
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly bus: Bus,
    private readonly registry: BuildingRegistry,
    private readonly store: PositionStore,
    private readonly options: { liveTtlSeconds: number; retentionDays: number },
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    await this.bus.subscribe('positions', (message) => this.onPositions(message));
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
    const records = this.live.query({ ...query, since: Date.now() - maxAgeSeconds * 1000 });
    return Promise.all(records.map(async (record) => toFeature(record, await this.levelHeightOf(record))));
  }

  async levelHeightOf(record: PositionRecord): Promise<number | null> {
    if (record.buildingId === null || record.floorId === null) return null;
    const runtime = await this.registry.get(record.organizationId, record.buildingId);
    return runtime?.floors.get(record.floorId)?.levelHeight ?? null;
  }

  stop(): void {
    for (const timer of this.timers) clearInterval(timer);
  }
}
