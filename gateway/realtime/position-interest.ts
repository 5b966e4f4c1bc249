import { BusInterest, type ReleaseInterest } from '../../shared/bus/bus-interest.js';
import type { PositionsMessage } from '../../shared/positions/positions-message.js';
import type { Bus, Channels } from '../bus-channels.js';
import { shardOfBuilding } from '../cluster/rendezvous.js';

export type PositionsChannel = `positions:${number}`;
export const positionsChannel = (shard: number): PositionsChannel => `positions:${shard}`;

const BUILDING_POSITIONS = /^buildings\/(\d+)\/positions$/;
const DEVICE_TOPIC = /^devices\//;

/**
 * Which live positions this gateway receives from the others: those of the shards something here needs, and no
 * other (issue 33: a gateway adds capacity only if it does no work for positions nobody here follows). A shard is
 * needed while a socket follows one of its buildings' positions, while a socket follows a device (organization-wide:
 * a device may be in any building, so every shard), for a while after a live query (REST, routing) asked for its
 * buildings, and while one of its buildings is under evacuation (arrivals, gateway/evacuations/muster-detection.ts).
 * The owner of a shard needs none of it: it detects from the shard's stream. Alarms, zone events and evacuation
 * changes are not positions: every gateway still receives them all.
 */
export class PositionInterest {
  private readonly interest: BusInterest<Channels, PositionsChannel>;

  constructor(
    bus: Bus,
    private readonly shards: number,
    onPositions: (message: PositionsMessage) => void,
    lingerMs: number,
  ) {
    this.interest = new BusInterest<Channels, PositionsChannel>(bus, (message) => onPositions(message), lingerMs);
  }

  /** Whether this gateway receives the shard's positions from the others now. */
  holdsShard(shard: number): boolean {
    return this.interest.holds(positionsChannel(shard));
  }

  /** The shards of these buildings; `undefined`: every shard (a query over the whole organization). */
  holdBuildings(buildingIds: readonly number[] | undefined): Promise<ReleaseInterest> {
    const shards = buildingIds ? [...new Set(buildingIds.map((id) => shardOfBuilding(id, this.shards)))] : this.allShards();
    return this.interest.hold(shards.map(positionsChannel));
  }

  /** What a socket following `topic` needs (nothing for a topic no position feeds). */
  holdTopic(topic: string): Promise<ReleaseInterest> {
    const building = BUILDING_POSITIONS.exec(topic);
    if (building) return this.holdBuildings([Number(building[1])]);
    if (DEVICE_TOPIC.test(topic)) return this.holdBuildings(undefined);
    return this.interest.hold([]);
  }

  close(): void {
    this.interest.close();
  }

  private allShards(): number[] {
    return Array.from({ length: this.shards }, (_, shard) => shard);
  }
}
