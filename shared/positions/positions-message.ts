import type { EncodedPayload } from '../bus/encoded-payload.js';
import type { PositionRecord } from './position-record.js';

/** The bus channel every accepted batch of positions travels on, to every gateway (this one included). */
export const POSITIONS_CHANNEL = 'positions';

/** What travels on the bus for one accepted batch: the change records, built once. */
export interface PositionsMessage {
  organizationId: string;
  records: PositionRecord[];
}

/**
 * One accepted batch packed at most once: its bytes go on the bus and, when every position of the batch falls in
 * one shard (an upload from one building), into that shard's stream too (gateway/cluster/shard-log.ts).
 */
export type EncodedPositions = EncodedPayload<PositionsMessage>;
