import type { Storage } from '../storage/storage.js';
import { epochMs } from '../storage/epoch-ms.js';

/** Which stored fixes make a device's trail: one device of one organization in one building over [from, to). */
export interface TrailQuery {
  organizationId: string;
  buildingId: number;
  deviceId: string;
  /** Epoch ms, inclusive. */
  from: number;
  /** Epoch ms, exclusive. */
  to: number;
  /** Only the fixes of this user (a `user`-role caller sees only their own). */
  userId?: string;
  /** At most this many fixes: the newest ones of the range. */
  limit: number;
}

/** One indoor fix of a trail, with when it was taken and when it reached the server. */
export interface TrailFix {
  /** When the fix was taken (the device's clock), epoch ms. */
  timestamp: number;
  /** When it first reached the server, epoch ms. */
  receivedAt: number;
  floorId: number;
  x: number;
  y: number;
}

interface RawFix {
  ts_ms: number;
  received_ms: number;
  floor_id: number;
  x: number;
  y: number;
}

/**
 * Reads a device's trail with each fix's arrival time (issue 30: the console draws the late part of a trail
 * differently). Indoor fixes only (a trail is drawn on a floor), one per fix time: a buffer the app sent twice is
 * stored twice, and the first arrival is the one that says how late it was (the evidence of a silence DEADMAN
 * reads fixes the same way). The newest `limit + 1` are read (the (organization_id, device_id, ts) index of m0005
 * serves the device and the range), so the caller can tell a cut trail from a whole one; returned oldest first.
 */
export class PositionTrail {
  constructor(private readonly storage: Pick<Storage, 'execute'>) {}

  async read(query: TrailQuery): Promise<{ fixes: TrailFix[]; truncated: boolean }> {
    const conditions = [
      'organization_id = ?',
      'building_id = ?',
      'device_id = ?',
      'indoor',
      'ts >= to_timestamp(?::float8 / 1000)',
      'ts < to_timestamp(?::float8 / 1000)',
    ];
    const params: unknown[] = [query.organizationId, query.buildingId, query.deviceId, query.from, query.to];
    if (query.userId !== undefined) conditions.push('user_id = ?'), params.push(query.userId);
    const rows = await this.storage.execute<RawFix>(
      `select ts_ms, received_ms, floor_id, x, y from (
         select distinct on (ts) ts, ${epochMs('ts')} as ts_ms, ${epochMs('received_at')} as received_ms, floor_id, x, y
         from positions
         where ${conditions.join(' and ')}
         order by ts desc, received_at
       ) fixes order by ts desc limit ?`,
      [...params, query.limit + 1],
    );
    const truncated = rows.length > query.limit;
    const fixes = rows.slice(0, query.limit).reverse().map(toFix);
    return { fixes, truncated };
  }
}

function toFix(raw: RawFix): TrailFix {
  return {
    timestamp: Number(raw.ts_ms),
    receivedAt: Number(raw.received_ms),
    floorId: Number(raw.floor_id),
    x: Number(raw.x),
    y: Number(raw.y),
  };
}
