import type { FieldError } from '../../shared/errors.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { EncodedPositions } from '../../shared/positions/positions-message.js';
import type { Principal } from '../auth/principal.js';
import type { Pose } from '../realtime/pose-schema.js';

/** A batch flowing through the pipeline; each step reads what earlier ones left and adds its own part. */
export interface PositionBatch {
  principal: Principal;
  /** Raw items as received, validated by the first step. */
  items: readonly unknown[];
  receivedAt: number;
  poses: Pose[];
  records: PositionRecord[];
  /** Problems found so far; the batch is refused, whole, once enrichment has looked at every pose. */
  errors: FieldError[];
  /** The records as `publish` put them on the bus, by shard, packed at most once (the shard streams take the same bytes). */
  published?: ReadonlyMap<number, EncodedPositions>;
}
