import type { Storage } from '../storage/storage.js';

/** Which stored fixes to read: one building of one organization over [from, to). */
export interface HistoryQuery {
  organizationId: string;
  buildingId: number;
  /** Epoch ms, inclusive. */
  from: number;
  /** Epoch ms, exclusive. */
  to: number;
  deviceId?: string;
  /** Only the fixes of this user (a `user`-role caller sees only their own). */
  userId?: string;
  /** Only indoor fixes (with a floor and x, y). */
  indoorOnly?: boolean;
}

/** One stored fix as history reads it. */
export interface HistoryRow {
  deviceId: string;
  /** When the fix was taken, epoch ms. */
  timestamp: number;
  indoor: boolean;
  floorId: number | null;
  x: number | null;
  y: number | null;
  yaw: number;
  lat: number;
  lng: number;
}

interface RawRow {
  device_id: string;
  ts_text: string;
  rid: string;
  indoor: boolean;
  floor_id: number | null;
  x: number | null;
  y: number | null;
  yaw: number;
  lat: number;
  lng: number;
}

/**
 * Rows per page. Small on purpose: a page is built and consumed between two young-generation collections, so
 * it dies young. With 5,000-row pages every page outlived a scavenge and was promoted, and the heap rose by
 * ~150 MiB between full collections during a long export (bench `csv-export`); at 1,000 it stays flat, and
 * the extra queries cost nothing measurable.
 */
export const HISTORY_PAGE_SIZE = 1000;

/**
 * Reads position history in (ts, device_id) order, one page at a time, by keyset: each page starts after
 * the last row of the previous one, so a page costs the same at the start and the end of a month and nothing
 * is held between pages (no cursor, no open transaction, no connection). The table has no key, and two fixes
 * of one device may share a timestamp, so the row's ctid breaks ties: within one timestamp every row sits in
 * the same day partition, where ctid is unique (rows are never updated, so it does not move).
 *
 * Each page is also bounded above by the timestamp of the page-size-th row after the cursor (found in index
 * order, no sort). Without that bound the plan depends on statistics: a day partition just filled and not yet
 * analysed is estimated at one row, and PostgreSQL then sorts everything after the cursor for every page
 * (100 ms a page on 100,000 rows, quadratic over the export) instead of an incremental sort.
 */
export class PositionHistory {
  constructor(
    private readonly storage: Storage,
    private readonly pageSize = HISTORY_PAGE_SIZE,
  ) {}

  /** Pages of rows, in order; the last page may be empty only when there is no row at all. */
  async *pages(query: HistoryQuery): AsyncGenerator<HistoryRow[]> {
    let after: Cursor | undefined;
    for (;;) {
      const raw = await this.page(query, after);
      if (raw.length === 0) {
        if (after === undefined) yield [];
        return;
      }
      yield raw.map(toRow);
      if (raw.length < this.pageSize) return;
      const last = raw[raw.length - 1]!;
      after = { ts: last.ts_text, deviceId: last.device_id, rid: last.rid };
    }
  }

  private page(query: HistoryQuery, after?: Cursor): Promise<RawRow[]> {
    const conditions = ['organization_id = ?', 'building_id = ?', 'ts >= ?::timestamptz', 'ts < ?::timestamptz'];
    const params: unknown[] = [
      query.organizationId,
      query.buildingId,
      new Date(query.from).toISOString(),
      new Date(query.to).toISOString(),
    ];
    if (query.deviceId !== undefined) conditions.push('device_id = ?'), params.push(query.deviceId);
    if (query.userId !== undefined) conditions.push('user_id = ?'), params.push(query.userId);
    if (query.indoorOnly) conditions.push('indoor');
    if (after) {
      // The plain `ts >=` lets the (organization_id, building_id, ts) index start the scan at the cursor.
      conditions.push('ts >= ?::timestamptz', '(ts, device_id, ctid) > (?::timestamptz, ?, ?::tid)');
      params.push(after.ts, after.ts, after.deviceId, after.rid);
    }
    const where = conditions.join(' and ');
    return this.storage.execute<RawRow>(
      `select device_id, to_char(ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as ts_text, ctid::text as rid,
              indoor, floor_id, x, y, yaw, lat, lng
       from positions
       where ${where}
         and ts <= coalesce((select ts from positions where ${where} order by ts limit 1 offset ?), 'infinity'::timestamptz)
       order by ts, device_id, ctid
       limit ?`,
      [...params, ...params, this.pageSize - 1, this.pageSize],
    );
  }
}

interface Cursor {
  ts: string;
  deviceId: string;
  rid: string;
}

function toRow(raw: RawRow): HistoryRow {
  return {
    deviceId: raw.device_id,
    // Microseconds in the text; the API speaks milliseconds.
    timestamp: Date.parse(`${raw.ts_text.slice(0, 23)}Z`),
    indoor: raw.indoor,
    floorId: raw.floor_id,
    x: raw.x,
    y: raw.y,
    yaw: raw.yaw,
    lat: raw.lat,
    lng: raw.lng,
  };
}
