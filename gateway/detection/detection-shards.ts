import type { Logger } from '../../shared/logger.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { Storage } from '../../shared/storage/index.js';
import type { ShardHandler } from '../cluster/shard-handler.js';
import { shardOfBuilding } from '../cluster/rendezvous.js';
import type { ShardEntry } from '../cluster/shard-log.js';
import type { OwnerDetection } from './owner-detection.js';

/** Restores buildings' detector state from storage (detector-state-loader.ts). */
export interface BuildingStateLoader {
  /** One organization's buildings in one set of queries; resolves to the devices restored. */
  rebuildBuildings(organizationId: string, buildingIds: readonly number[]): Promise<number>;
}

/** The latest position of each device this gateway holds for live feeds (gateway/realtime/live-state.ts). */
export interface LatestPositions {
  latest(organizationId: string, deviceId: string): PositionRecord | undefined;
}

/** Drops a building's detector state without emitting (detection-engine.ts). */
export interface BuildingStateHolder {
  forgetBuilding(buildingId: number): void;
}

export interface DetectionShardsDependencies {
  /** Runs the detectors over a read and stores what they found. */
  detection: Pick<OwnerDetection, 'detect' | 'stored'>;
  loader: BuildingStateLoader;
  engine: BuildingStateHolder;
  live: LatestPositions;
  /** Where the buildings of a shard are listed. */
  storage: Storage;
  /** CLUSTER_SHARDS. */
  shards: number;
  logger: Logger;
}

/**
 * Detection as the owner of shards: on taking a shard, the state of each of its buildings is rebuilt from
 * storage (before its pending positions are replayed); on giving it up, their state is dropped; in between,
 * the shard's positions are run through the detectors and what they find is stored.
 */
export class DetectionShards implements ShardHandler {
  /** Buildings of each held shard: listed when it was taken, plus those whose positions arrived since. */
  private readonly buildings = new Map<number, Set<number>>();
  /** The building list being read: shards taken together (at start, after a member left) share one query. */
  private listing?: Promise<{ id: number; organization_id: string }[]>;

  constructor(private readonly deps: DetectionShardsDependencies) {}

  /** Buildings known in a shard this member holds. */
  buildingsIn(shard: number): number {
    return this.buildings.get(shard)?.size ?? 0;
  }

  async gain(shard: number): Promise<void> {
    this.listing ??= this.deps.storage
      .execute<{ id: number; organization_id: string }>('select id, organization_id from buildings')
      .finally(() => (this.listing = undefined));
    const rows = await this.listing;
    const mine = rows.filter((row) => shardOfBuilding(Number(row.id), this.deps.shards) === shard);
    const buildings = new Set<number>();
    const byOrganization = new Map<string, number[]>();
    for (const row of mine) {
      buildings.add(Number(row.id));
      byOrganization.set(row.organization_id, [...(byOrganization.get(row.organization_id) ?? []), Number(row.id)]);
    }
    let devices = 0;
    for (const [organizationId, ids] of byOrganization) devices += await this.deps.loader.rebuildBuildings(organizationId, ids);
    this.buildings.set(shard, buildings);
    this.deps.logger.debug({ shard, buildings: buildings.size, devices }, 'shard taken: detector state rebuilt');
  }

  lose(shard: number): void {
    for (const building of this.buildings.get(shard) ?? []) this.deps.engine.forgetBuilding(building);
    this.buildings.delete(shard);
  }

  process(shard: number, entries: readonly ShardEntry[], holds: () => boolean): Promise<boolean> {
    const known = this.buildings.get(shard);
    const records: PositionRecord[] = [];
    for (const entry of entries) {
      for (const record of entry.records) {
        if (record.buildingId !== null) known?.add(record.buildingId);
        records.push(this.shared(record));
      }
    }
    return this.deps.detection.detect(records, holds);
  }

  /**
   * The live state's object for the same position when it holds it (uploaded here, or received on the bus for a
   * socket or live query here, usually before the stream hands it here): the detectors keep each device's last position, and the copy
   * decoded from the stream would be a second one per device beside the live state's, about 380 bytes.
   */
  private shared(record: PositionRecord): PositionRecord {
    const live = this.deps.live.latest(record.organizationId, record.deviceId);
    return live !== undefined && live.timestamp === record.timestamp && live.receivedAt === record.receivedAt ? live : record;
  }

  stored(organizations?: ReadonlySet<string>): Promise<boolean> {
    return this.deps.detection.stored(organizations);
  }
}
