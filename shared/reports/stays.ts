import { pgArray } from '../storage/pg-array.js';
import { FenceGrid, shapesOf, type FenceRow, type FenceShape } from './fence-grid.js';
import { HOUR_MS, pendingDeviceHours, utcHour, watermark, type DeviceHour, type Materialization } from './materializer.js';
import { joinSql, sqlOf, type Execute, type Sql } from './report-sql.js';
import { addWindow, pushTo, SessionWindows, type Position, type Run, type Window, type WindowRow } from './session-windows.js';

/**
 * Geofence stays kept as positions arrive. A stay segment is a run (see session-windows.ts: positions of a
 * device in a geofence with gaps of at most STAYS_THRESHOLD_S) of one device-hour, one geofence, one user and
 * one building, computed against one geometry version, with its first and last position and their count.
 * Any session threshold T >= STAYS_THRESHOLD_S is answered exactly by joining segments (and raw runs) whose
 * gap is within T: every gap inside a segment is within T, and no segment spans a gap of the positions over T.
 * Splitting per user and building keeps the report's user and building filters exact.
 */
export const STAYS_THRESHOLD_S = 15;

const INSERT_BATCH = 5000;

/** Runs per `device \0 fence id`. */
export type FenceRuns = Map<string, Run[]>;

/**
 * Runs of positions in the grid's shapes, from `source` (positions aliased `p`, or a subquery of them) under
 * `where`, which must select the same positions when re-read from `positions p`. `keyOf` names a run's key
 * from the row (device, user, building...), the shape and the position's time (µs after the origin).
 */
async function shapeRuns(
  execute: Execute,
  grid: FenceGrid,
  timing: SessionWindows,
  source: Sql,
  where: Sql,
  extra: { select: string; group: string },
  keyOf: (row: Record<string, any>, shape: FenceShape, t: number) => string,
): Promise<FenceRuns> {
  const layers = Array.from({ length: grid.layers }, (_, layer) => layer);
  const hits = joinSql(layers.map((layer) => joinSql([grid.hit(layer), ` as k${layer}`])), ', ');
  const shapesOfRow = (row: Record<string, unknown>) => layers.map((layer) => Number(row[`k${layer}`])).filter((n) => n !== 0).map((n) => grid.shapes[n - 1]!);
  const rows = await execute<WindowRow>(
    joinSql(['select p.device_id, p.user_id::text as user_id, ', extra.select, hits, ', ', timing.aggregates, ' from ', source, ' where ', where, ` group by p.device_id, p.user_id, ${extra.group}${layers.map((layer) => `k${layer}`).join(', ')}, `, timing.window]),
  );
  const windows = new Map<string, Window>();
  for (const row of rows) for (const shape of shapesOfRow(row)) addWindow(windows, timing, keyOf(row, shape, Number(row.first_us)), row);
  return timing.sessions(windows.values(), async (wanted) => {
    const exact = new Map<string, Position[]>();
    for (const row of await execute<Record<string, any>>(timing.reread(joinSql([`p.device_id, p.user_id::text as user_id, ${extra.select}`, hits]), where, wanted))) {
      const t = Number(row.t);
      for (const shape of shapesOfRow(row)) pushTo(exact, `${keyOf(row, shape, t)}\u0000${Math.floor(t / timing.windowUs)}`, { t, user: row.user_id });
    }
    return exact;
  });
}

/** Runs of each device in each geofence (keyed `device \0 fence id`), from positions: the raw path. */
export function fenceRuns(execute: Execute, grid: FenceGrid, timing: SessionWindows, source: Sql, where: Sql): Promise<FenceRuns> {
  return shapeRuns(execute, grid, timing, source, joinSql([where, ' and ', positionsInGrid(grid)]), { select: '', group: '' }, (row, shape) => `${row.device_id}\u0000${shape.fenceId}`);
}

/** Positions on the grid's floors and in a cell of some geofence (which also rules out a null x or y). */
function positionsInGrid(grid: FenceGrid): Sql {
  const floors = grid.floorIds.length === 1 ? sqlOf('p.floor_id = ?', grid.floorIds[0]) : sqlOf('p.floor_id = any(?::int[])', pgArray(grid.floorIds));
  return joinSql([floors, ' and ', grid.candidate]);
}

/** Joins time-ordered runs wherever the gap between them is within the threshold (as SessionWindows does). */
export function joinRuns(runs: Run[], thresholdUs: number): Run[] {
  const joined: Run[] = [];
  for (const run of [...runs].sort((a, b) => a.first - b.first)) {
    const last = joined[joined.length - 1];
    if (last && run.first - last.last <= thresholdUs) {
      last.last = Math.max(last.last, run.last);
      last.n += run.n;
      last.user = last.user === null ? run.user : run.user === null || last.user >= run.user ? last.user : run.user;
    } else joined.push({ ...run });
  }
  return joined;
}

/**
 * Rebuilds the stay segments of device-hours: deletes what was kept for them and stores the runs their
 * positions make in every geofence of the organization (deleted ones too: a report can still name them),
 * against each geofence's current geometry version.
 */
async function rebuild(execute: Execute, units: readonly DeviceHour[]): Promise<void> {
  const byOrganization = new Map<string, DeviceHour[]>();
  for (const unit of units) pushTo(byOrganization, unit.organizationId, unit);
  for (const [organizationId, list] of byOrganization) {
    const devices = pgArray(list.map((unit) => unit.deviceId));
    const hours = pgArray(list.map((unit) => unit.hour.toISOString()));
    await execute(
      sqlOf(
        'delete from geofence_stays s using unnest(?::text[], ?::timestamptz[]) as u(device_id, hour) where s.organization_id = ? and s.device_id = u.device_id and s.hour = u.hour',
        devices,
        hours,
        organizationId,
      ),
    );
    const fences = await execute<FenceRow>(sqlOf('select id, name, floor_id, type, cartesians, radius, geometry_version, geometry_since from geofences where organization_id = ? order by id', organizationId));
    const { shapes } = shapesOf(fences);
    if (shapes.length === 0) continue;
    const grid = FenceGrid.for(shapes);
    const first = Math.min(...list.map((unit) => unit.hour.getTime()));
    const last = Math.max(...list.map((unit) => unit.hour.getTime()));
    const origin = new Date(first).toISOString();
    const timing = new SessionWindows(STAYS_THRESHOLD_S, origin, (last + HOUR_MS - first) * 1000);
    const source = sqlOf(
      "unnest(?::text[], ?::timestamptz[]) as u(device_id, hour) join positions p on p.organization_id = ? and p.device_id = u.device_id and p.ts >= u.hour and p.ts < u.hour + interval '1 hour'",
      devices,
      hours,
      organizationId,
    );
    // Re-read windows may reach into a neighbouring hour: keyed by hour, its positions land where no run is asked for.
    const where = joinSql([sqlOf('p.organization_id = ? and ', organizationId), positionsInGrid(grid)]);
    const segments = new Map<string, { device: string; hour: number; user: string | null; building: number | null; shape: FenceShape }>();
    const runs = await shapeRuns(execute, grid, timing, source, where, { select: 'p.building_id, ', group: `p.building_id, ${utcHour('p.ts')}, ` }, (row, shape, t) => {
      const hour = first + Math.floor(t / 1000 / HOUR_MS) * HOUR_MS;
      const key = `${row.device_id}\u0000${hour}\u0000${row.user_id ?? ''}\u0000${row.building_id ?? ''}\u0000${shape.fenceId}`;
      if (!segments.has(key)) segments.set(key, { device: row.device_id, hour, user: row.user_id ?? null, building: row.building_id ?? null, shape });
      return key;
    });
    const rows = [...runs].flatMap(([key, list]) => list.map((run) => ({ ...segments.get(key)!, run })));
    for (let i = 0; i < rows.length; i += INSERT_BATCH) {
      const batch = rows.slice(i, i + INSERT_BATCH);
      await execute(
        sqlOf(
          `insert into geofence_stays (organization_id, device_id, hour, fence_id, geometry_version, user_id, building_id, first_ts, last_ts, positions)
           select ?::uuid, s.device_id, s.hour, s.fence_id, s.version, s.user_id, s.building_id,
                  ?::timestamptz + s.first_us * interval '1 microsecond', ?::timestamptz + s.last_us * interval '1 microsecond', s.n
           from unnest(?::text[], ?::timestamptz[], ?::uuid[], ?::int[], ?::uuid[], ?::int[], ?::int8[], ?::int8[], ?::int[]) as s(device_id, hour, fence_id, version, user_id, building_id, first_us, last_us, n)`,
          organizationId,
          origin,
          origin,
          pgArray(batch.map((r) => r.device)),
          pgArray(batch.map((r) => new Date(r.hour).toISOString())),
          pgArray(batch.map((r) => r.shape.fenceId)),
          pgArray(batch.map((r) => r.shape.version)),
          pgArray(batch.map((r) => r.user)),
          pgArray(batch.map((r) => r.building)),
          pgArray(batch.map((r) => r.run.first)),
          pgArray(batch.map((r) => r.run.last)),
          pgArray(batch.map((r) => r.run.n)),
        ),
      );
    }
  }
}

export const geofenceStays: Materialization = {
  name: 'geofence stays',
  rebuild,
  async deleteBefore(execute: Execute, cutoff: Date): Promise<void> {
    await execute(sqlOf('delete from geofence_stays where hour < ?', cutoff.toISOString()));
  },
};

/** What a geofence report asks, as fenceSessions resolved it. */
export interface StaysQuery {
  organizationId: string;
  from: number;
  to: number;
  shapes: FenceShape[];
  timing: SessionWindows;
  /** The report's position filter (organization, window, user, device, building...), on `p`. */
  where: Sql;
  /** The same filters on stay segments `s` (user, device, building, only assigned). */
  staysWhere: Sql;
}

/**
 * The runs a geofence report needs, from stay segments wherever they answer exactly, and from positions
 * elsewhere; undefined when segments cannot help (a threshold below theirs, no whole hour materialised
 * before the window's end). A geofence's segments are read for whole UTC hours of the window, from the first
 * hour its current geometry was in effect for all of, for every device-hour not pending (see
 * materializer.ts) and kept against that geometry version; the rest of the window (its ragged ends, the time
 * before that geometry, pending device-hours) is computed from positions, and both are joined per device and
 * geofence with the report's threshold, so a stay crossing any of these boundaries is one run.
 */
export async function staysRuns(execute: Execute, query: StaysQuery): Promise<FenceRuns | undefined> {
  const { timing, shapes } = query;
  if (timing.thresholdUs < STAYS_THRESHOLD_S * 1e6) return undefined;
  const kept = await watermark(execute);
  const start = Math.ceil(query.from / HOUR_MS) * HOUR_MS;
  const end = Math.floor(query.to / HOUR_MS) * HOUR_MS;
  if (!Number.isFinite(kept) || start >= end || start >= kept) return undefined;
  // Per geofence, the first whole hour its current geometry covers; geofences sharing it share a raw query.
  const cutoffOf = (shape: FenceShape) => Math.min(Math.max(start, Math.ceil(shape.since.getTime() / HOUR_MS) * HOUR_MS), end);
  const version = new Map(shapes.map((shape) => [shape.fenceId, shape]));
  const pending = new Set((await pendingDeviceHours(execute, query.organizationId, new Date(start), new Date(end))).map((unit) => `${unit.deviceId}\u0000${unit.hour.getTime()}`));
  const segments = await execute<{ device_id: string; fence_id: string; geometry_version: number; user_id: string | null; hour_ms: string; first_us: string; last_us: string; positions: number }>(
    joinSql([
      'select s.device_id, s.fence_id::text as fence_id, s.geometry_version, s.user_id::text as user_id, (extract(epoch from s.hour) * 1000)::int8 as hour_ms, ',
      timing.offset('s.first_ts'),
      ' as first_us, ',
      timing.offset('s.last_ts'),
      ' as last_us, s.positions from geofence_stays s where ',
      sqlOf('s.organization_id = ? and s.hour >= ? and s.hour < ? and s.fence_id = any(?::uuid[])', query.organizationId, new Date(start).toISOString(), new Date(end).toISOString(), pgArray(shapes.map((shape) => shape.fenceId))),
      query.staysWhere,
    ]),
  );
  // A segment of another version in a served hour (kept before the geometry changed): that device-hour is raw.
  for (const segment of segments) {
    const shape = version.get(segment.fence_id)!;
    if (segment.geometry_version !== shape.version && Number(segment.hour_ms) >= cutoffOf(shape)) pending.add(`${segment.device_id}\u0000${segment.hour_ms}`);
  }
  const runs: FenceRuns = new Map();
  for (const segment of segments) {
    const hour = Number(segment.hour_ms);
    if (hour < cutoffOf(version.get(segment.fence_id)!) || pending.has(`${segment.device_id}\u0000${hour}`)) continue;
    pushTo(runs, `${segment.device_id}\u0000${segment.fence_id}`, { first: Number(segment.first_us), last: Number(segment.last_us), n: segment.positions, user: segment.user_id });
  }
  const pendingByHour = new Map<string, string[]>();
  for (const unit of pending) {
    const [device, hour] = unit.split('\u0000') as [string, string];
    pushTo(pendingByHour, hour, device);
  }
  const byCutoff = new Map<string, FenceShape[]>();
  for (const shape of shapes) pushTo(byCutoff, String(cutoffOf(shape)), shape);
  for (const [cutoff, group] of byCutoff) {
    // Raw pieces: the window up to the group's cutoff, its end after the last whole hour, pending device-hours in between.
    const iso = (ms: number) => new Date(ms).toISOString();
    const pieces: Sql[] = [];
    if (Number(cutoff) > query.from) pieces.push(sqlOf('p.ts < ?', iso(Number(cutoff))));
    if (end < query.to) pieces.push(sqlOf('p.ts >= ?', iso(end)));
    for (const [hour, devices] of pendingByHour) {
      if (Number(hour) >= Number(cutoff)) pieces.push(sqlOf('p.ts >= ? and p.ts < ? and p.device_id = any(?::text[])', iso(Number(hour)), iso(Number(hour) + HOUR_MS), pgArray(devices)));
    }
    if (pieces.length === 0) continue;
    const source = joinSql(['(', joinSql(pieces.map((piece) => joinSql(['select * from positions p where ', query.where, ' and ', piece])), ' union all '), ') p']);
    const where = joinSql([query.where, ' and (', joinSql(pieces.map((piece) => joinSql(['(', piece, ')'])), ' or '), ')']);
    for (const [key, list] of await fenceRuns(execute, FenceGrid.for(group), timing, source, where)) for (const run of list) pushTo(runs, key, run);
  }
  for (const [key, list] of runs) runs.set(key, joinRuns(list, timing.thresholdUs));
  return runs;
}
