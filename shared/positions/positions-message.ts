import type { PositionRecord } from './position-record.js';

/** The bus channel every accepted batch of positions travels on, to every gateway (this one included). */
export const POSITIONS_CHANNEL = 'positions';

/** What travels on the bus for one accepted batch: the change records, built once. */
export interface PositionsMessage {
  organizationId: string;
  /** The gateway that accepted the batch (it has already run detection on it). */
  originNode: string;
  records: PositionRecord[];
}
