import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { EncodedPositions } from '../../shared/positions/positions-message.js';
import type { PositionBatch } from './position-batch.js';

/** Raises the alarms the poses of a batch ask for (gateway/alarms/requested-alarms.ts). */
export interface RequestedAlarmRaiser {
  /** Stores them before it resolves; refuses the batch (before any write) past the caller's budget. */
  raise(batch: PositionBatch): Promise<void>;
}

/** Where accepted positions go for detection: to the owners of their buildings (gateway/cluster/cluster-node.ts). */
export interface PositionHandOff {
  /** Before storing: waits while the owners of these positions are too far behind, or refuses (503). */
  admit(records: readonly PositionRecord[]): Promise<void> | undefined;
  /** `published`: the same records as packed for the bus, by shard, whose bytes the hand-off may reuse. Never rejects. */
  handOff(records: readonly PositionRecord[], published?: ReadonlyMap<number, EncodedPositions>): Promise<void>;
}

/** Where accepted positions go live: this gateway's live state, and the bus to the others (gateway/realtime). */
export interface LivePositions {
  /** Resolves once published, to the records as packed for the bus, by shard. */
  publish(organizationId: string, records: PositionRecord[]): Promise<ReadonlyMap<number, EncodedPositions>>;
}
