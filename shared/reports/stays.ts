import { pgArray } from '../storage/pg-array.js';
import { FenceGrid, shapesOf, type FenceRow, type FenceShape } from './fence-grid.js';
import { HOUR_MS, pendingDeviceHours, watermark, type DeviceHour, type Materialization } from './materializer.js';
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


/** Runs per `device \0 fence id`. */
export type FenceRuns = Map<string, Run[]>;

/**
 * Runs of each device in each geofence (keyed `device \0 fence id`), from positions: the raw path. `source`
 * (positions aliased `p`, or a subquery of them) under `where`, which must select the same positions when
 * re-read from `positions p`.
 */
export async function fenceRuns(execute: Execute, grid: FenceGrid, timing: SessionWindows, source: Sql, where: Sql): Promise<FenceRuns> {
  const layers = Array.from({ length: grid.layers }, (_, layer) => layer);
  const hits = joinSql(layers.map((layer) => joinSql([grid.hit(layer), ` as k${layer}`])), ', ');
  const shapesOfRow = (row: Record<string, unknown>) => layers.map((layer) => Number(row[`k${layer}`])).filter((n) => n !== 0).map((n) => grid.shapes[n - 1]!);
  const inGrid = joinSql([where, ' and ', positionsInGrid(grid)]);
  const rows = await execute<WindowRow>(
    joinSql(['select p.device_id, p.user_id::text as user_id, ', hits, ', ', timing.aggregates, ' from ', source, ' where ', inGrid, ` group by p.device_id, p.user_id, ${layers.map((layer) => `k${layer}`).join(', ')}, `, timing.window]),
  );
  const windows = new Map<string, Window>();
  for (const row of rows) for (const shape of shapesOfRow(row)) addWindow(windows, timing, `${row.device_id}\u0000${shape.fenceId}`, row);
  return timing.sessions(windows.values(), async (wanted) => {
    const exact = new Map<string, Position[]>();
    for (const row of await execute<Record<string, any>>(timing.reread(joinSql(['p.device_id, p.user_id::text as user_id, ', hits]), inGrid, wanted))) {
      const t = Number(row.t);
      for (const shape of shapesOfRow(row)) pushTo(exact, `${row.device_id}\u0000${shape.fenceId}\u0000${Math.floor(t / timing.windowUs)}`, { t, user: row.user_id });
    }
    return exact;
  });
}

/** Positions on the grid's floors and in a cell of some geofence (which also rules out a null x or y). */
function positionsInGrid(grid: FenceGrid): Sql {
  const floors = grid.floorIds.length === 1 ? sqlOf('p.floor_id = ?', grid.floorIds[0]) : sqlOf('p.floor_id = any(?::int[])', pgArray(grid.floorIds));
  return joinSql([floors, ' and ', grid.candidate]);
}

/**
 * Rebuilds the stay segments of device-hours: deletes what was kept for them and stores the runs their
 * positions make in every geofence of the organization (deleted ones too: a report can still name them),
 * against each geofence's current geometry version. One statement per organization finds each position's
 * shapes (the grid's layers, a lateral row each), splits the positions of each device-hour, user, building and
 * shape into runs by time (a gap over STAYS_THRESHOLD_S starts one) and inserts them: no position is sent to
 * this process or read twice (fenceRuns' windows and re-reads, sent here and inserted back, cost several times
 * the CPU per position, in this process and in the database).
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
    // Device-hours by number (`unit`), which sorts faster than device ids and hours. Shapes join on xid equality,
    // which hashes but cannot merge: the planner chose a merge join, sorting every entry to join 1,000 shapes.
    const run = 'partition by h.unit, h.user_id, h.building_id, h.shape order by h.ts';
    await execute(
      joinSql([
        sqlOf(
          `insert into geofence_stays (organization_id, device_id, hour, fence_id, geometry_version, user_id, building_id, first_ts, last_ts, positions)
           select ?::uuid, (?::text[])[h.unit], (?::timestamptz[])[h.unit], (?::uuid[])[h.shape], (?::int[])[h.shape], h.user_id, h.building_id, min(h.ts), max(h.ts), count(*)::int
           from (
             select h.*, sum(h.starts) over (${run} rows unbounded preceding) as run
             from (
               select h.*, case when h.ts - lag(h.ts) over (${run}) <= make_interval(secs => ?) then 0 else 1 end as starts
               from (
                 select p.unit, p.user_id, p.building_id, p.ts, abs(p.entry) as shape
                 from (
                   select u.unit, p.user_id, p.building_id, p.ts, p.floor_id, p.x, p.y, unnest(`,
          organizationId,
          devices,
          hours,
          pgArray(grid.shapes.map((shape) => shape.fenceId)),
          pgArray(grid.shapes.map((shape) => shape.version)),
          STAYS_THRESHOLD_S,
        ),
        grid.entries,
        sqlOf(
          `) as entry
                   from unnest(?::text[], ?::timestamptz[]) with ordinality as u(device_id, hour, unit)
                   join positions p on p.organization_id = ? and p.device_id = u.device_id and p.ts >= u.hour and p.ts < u.hour + interval '1 hour'
                   where `,
          devices,
          hours,
          organizationId,
        ),
        positionsInGrid(grid),
        `
                 ) p
                 join `,
        grid.relation,
        ` on f.n::int::text::xid = abs(p.entry)::text::xid
                 where p.entry > 0 or ${FenceGrid.inShape}
               ) h
             ) h
           ) h
           group by h.unit, h.user_id, h.building_id, h.shape, h.run`,
      ]),
    );
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
 * How a geofence report reads kept stays: `kept` selects segments as runs (see sessionsSql) in sessionsSql's
 * order (none when no geofence has a whole hour served), `raw` the rest of the window's runs.
 */
export interface StaysPlan {
  kept?: Sql;
  raw: FenceRuns;
}

/**
 * Where stay segments answer a geofence report exactly, and the runs of the rest from positions; undefined
 * when segments cannot help (a threshold below theirs, no whole hour materialised before the window's end).
 * A geofence's segments are read for whole UTC hours of the window, from the first hour its current geometry
 * was in effect for all of, for every device-hour not pending (see materializer.ts) and kept against that
 * geometry version; the rest of the window (its ragged ends, the time before that geometry, pending
 * device-hours) is computed from positions, and sessionsSql joins both per device and geofence with the
 * report's threshold, so a stay crossing any of these boundaries is one run. Segments are not read here:
 * sessionsSql reads them in the statement that joins them (a month is hundreds of thousands of segments).
 */
export async function staysPlan(execute: Execute, query: StaysQuery): Promise<StaysPlan | undefined> {
  const { timing, shapes } = query;
  if (timing.thresholdUs < STAYS_THRESHOLD_S * 1e6) return undefined;
  const kept = await watermark(execute);
  const start = Math.ceil(query.from / HOUR_MS) * HOUR_MS;
  const end = Math.floor(query.to / HOUR_MS) * HOUR_MS;
  if (!Number.isFinite(kept) || start >= end || start >= kept) return undefined;
  const iso = (ms: number) => new Date(ms).toISOString();
  // Per geofence, the first whole hour its current geometry covers; geofences sharing it share a raw query.
  const cutoffOf = (shape: FenceShape) => Math.min(Math.max(start, Math.ceil(shape.since.getTime() / HOUR_MS) * HOUR_MS), end);
  const pending = new Map<string, { device: string; hour: number }>();
  for (const unit of await pendingDeviceHours(execute, query.organizationId, new Date(start), new Date(end), kept)) pending.set(`${unit.deviceId}\u0000${unit.hour.getTime()}`, { device: unit.deviceId, hour: unit.hour.getTime() });
  // A segment of another version in a served hour (kept before the geometry changed): that device-hour is raw.
  // Versions only grow (from 1), so only geofences changed since have such segments, and the index on
  // (organization, fence, version, hour) finds them without reading the rest: per geofence (a lateral kept apart
  // by `offset 0`), since a join's guess of a third of a month's segments had the planner scan them all in parallel.
  const changed = shapes.filter((shape) => shape.version > 1 && cutoffOf(shape) < end);
  if (changed.length > 0) {
    for (const row of await execute<{ device_id: string; hour_ms: string }>(
      sqlOf(
        `select distinct s.device_id, (extract(epoch from s.hour) * 1000)::int8 as hour_ms
         from unnest(?::uuid[], ?::int[], ?::timestamptz[]) as f(fence_id, version, cutoff)
         cross join lateral (select s.device_id, s.hour from geofence_stays s where s.organization_id = ? and s.fence_id = f.fence_id and s.geometry_version < f.version and s.hour >= f.cutoff and s.hour < ? offset 0) s`,
        pgArray(changed.map((shape) => shape.fenceId)),
        pgArray(changed.map((shape) => shape.version)),
        pgArray(changed.map((shape) => iso(cutoffOf(shape)))),
        query.organizationId,
        iso(end),
      ),
    )) {
      pending.set(`${row.device_id}\u0000${row.hour_ms}`, { device: row.device_id, hour: Number(row.hour_ms) });
    }
  }
  const segments = keptSegments(query, shapes.map((shape) => ({ shape, cutoff: cutoffOf(shape) })), end, [...pending.values()]);
  const pendingByHour = new Map<string, string[]>();
  for (const unit of pending.values()) pushTo(pendingByHour, String(unit.hour), unit.device);
  const raw: FenceRuns = new Map();
  const byCutoff = new Map<string, FenceShape[]>();
  for (const shape of shapes) pushTo(byCutoff, String(cutoffOf(shape)), shape);
  for (const [key, group] of byCutoff) {
    const cutoff = Number(key);
    // Raw pieces: the window up to the group's cutoff, its end after the last whole hour, pending device-hours in between.
    const pieces: Sql[] = [];
    if (cutoff > query.from) pieces.push(sqlOf('p.ts < ?', iso(cutoff)));
    if (end < query.to) pieces.push(sqlOf('p.ts >= ?', iso(end)));
    for (const [hour, devices] of pendingByHour) {
      if (Number(hour) >= cutoff) pieces.push(sqlOf('p.ts >= ? and p.ts < ? and p.device_id = any(?::text[])', iso(Number(hour)), iso(Number(hour) + HOUR_MS), pgArray(devices)));
    }
    if (pieces.length === 0) continue;
    const source = joinSql(['(', joinSql(pieces.map((piece) => joinSql(['select * from positions p where ', query.where, ' and ', piece])), ' union all '), ') p']);
    const where = joinSql([query.where, ' and (', joinSql(pieces.map((piece) => joinSql(['(', piece, ')'])), ' or '), ')']);
    for (const [key, list] of await fenceRuns(execute, FenceGrid.for(group), timing, source, where)) for (const run of list) pushTo(raw, key, run);
  }
  return { kept: segments, raw };
}

const DAY_MS = 24 * HOUR_MS;

/**
 * The segments a plan serves (see staysPlan), as runs in the order sessionsSql joins them (device, geofence,
 * first_ts, last_ts): one sub-select per UTC day, each read in that order from geofence_stays_day_order_idx
 * (m0014), which PostgreSQL merges (a merge append) instead of sorting a month of segments. Geofences are
 * conditions on the segment rather than a join with a list of them: a join's estimate (a few thousand rows for
 * a month's hundreds of thousands) made the planner hash and sort where streaming was cheaper, and a join's
 * output order is lost.
 */
function keptSegments(query: StaysQuery, fences: { shape: FenceShape; cutoff: number }[], end: number, pending: { device: string; hour: number }[]): Sql | undefined {
  const iso = (ms: number) => new Date(ms).toISOString();
  // Geofences sharing a cutoff and a geometry version share a condition (usually there is one of each).
  const arms = new Map<string, { cutoff: number; version: number; fences: string[] }>();
  for (const { shape, cutoff } of fences) {
    if (cutoff >= end) continue;
    const key = `${cutoff}/${shape.version}`;
    const arm = arms.get(key) ?? arms.set(key, { cutoff, version: shape.version, fences: [] }).get(key)!;
    arm.fences.push(shape.fenceId);
  }
  const first = Math.min(...[...arms.values()].map((arm) => arm.cutoff));
  const days: Sql[] = [];
  // (No arm: `first` is Infinity and no day is read.)
  for (let day = Math.floor(first / DAY_MS) * DAY_MS; day < end; day += DAY_MS) {
    const from = Math.max(day, first);
    const to = Math.min(day + DAY_MS, end);
    const served = [...arms.values()].filter((arm) => arm.cutoff < to);
    if (served.length === 0) continue;
    const excluded = pending.filter((unit) => unit.hour >= from && unit.hour < to);
    days.push(
      joinSql([
        sqlOf(
          `select * from (select s.device_id, s.fence_id, s.first_ts, s.last_ts, s.positions as n, s.user_id from geofence_stays s
           where s.organization_id = ? and (s.hour at time zone 'UTC')::date = ?::date`,
          query.organizationId,
          iso(day).slice(0, 10),
        ),
        // (Bounds a whole day or an arm's cutoff already meets are left out: they are tested on every segment.)
        from > day || to < day + DAY_MS ? sqlOf(' and s.hour >= ? and s.hour < ?', iso(from), iso(to)) : '',
        ' and (',
        joinSql(
          served.map((arm) =>
            joinSql(['(', arm.cutoff > from ? sqlOf('s.hour >= ? and ', iso(arm.cutoff)) : '', sqlOf('s.geometry_version = ? and s.fence_id = any(?::uuid[]))', arm.version, pgArray(arm.fences))]),
          ),
          ' or ',
        ),
        ')',
        query.staysWhere,
        ...(excluded.length > 0
          ? [sqlOf(' and (s.device_id, s.hour) not in (select * from unnest(?::text[], ?::timestamptz[]))', pgArray(excluded.map((unit) => unit.device)), pgArray(excluded.map((unit) => iso(unit.hour))))]
          : []),
        ` order by s.device_id collate "C", s.fence_id, s.first_ts, s.last_ts) k`,
      ]),
    );
  }
  return days.length > 0 ? joinSql(days, ' union all ') : undefined;
}

/**
 * `with ... sessions`: the runs of `raw` (and the segments `kept` selects, when given: selected in the order of
 * the partitions below, they are merged rather than sorted; see keptSegments) joined per device and
 * geofence wherever the gap between them is within the report's threshold, by this rule (a run joins when
 * it starts within the threshold of the latest end before it; the result does not depend on how the runs were
 * grouped before, so runs joined already join again alike). Columns: device_id, fence_id (uuid), first_ts,
 * last_ts, n, user_id (the greatest, as text). In PostgreSQL, so that a month of segments is never sent to this
 * process; on timestamps, whose differences compare exactly to the µs, so no offset is computed per segment.
 * A report selects from `sessions` (and computes offsets, with timing.offset, of what it returns only).
 */
export function sessionsSql(timing: SessionWindows, raw: FenceRuns, kept?: Sql): Sql {
  const runs = [...raw].flatMap(([key, list]) => {
    const [device, fence] = key.split('\u0000') as [string, string];
    return list.map((run) => ({ device, fence, run }));
  });
  const given = sqlOf(
    `select r.device_id, r.fence_id, ?::timestamptz + r.first_us * interval '1 microsecond' as first_ts, ?::timestamptz + r.last_us * interval '1 microsecond' as last_ts, r.n, r.user_id
     from unnest(?::text[], ?::uuid[], ?::int8[], ?::int8[], ?::int[], ?::uuid[]) as r(device_id, fence_id, first_us, last_us, n, user_id)`,
    timing.origin,
    timing.origin,
    pgArray(runs.map((r) => r.device)),
    pgArray(runs.map((r) => r.fence)),
    pgArray(runs.map((r) => r.run.first)),
    pgArray(runs.map((r) => r.run.last)),
    pgArray(runs.map((r) => r.run.n)),
    pgArray(runs.map((r) => r.run.user)),
  );
  // Partitions compare device ids byte-wise ("C"): any total order joins alike, and it sorts faster. Each source
  // arrives in that order (the kept days from their index, the given runs sorted), so PostgreSQL merges them and
  // every step after streams: the windows, then the sessions grouped over the same order (an incremental sort
  // on `session`, already in order within each device and geofence), where hashing a month's sessions cost more.
  const order = 'r.device_id collate "C", r.fence_id, r.first_ts, r.last_ts';
  const partition = 'partition by r.device_id collate "C", r.fence_id order by r.first_ts, r.last_ts';
  return joinSql([
    'with runs as (',
    ...(kept ? [kept, ' union all '] : []),
    'select * from (select * from (',
    given,
    `) r order by ${order}) g`,
    sqlOf(
      `), marked as (
         select r.*, case when r.first_ts - max(r.last_ts) over (${partition} rows between unbounded preceding and 1 preceding) <= ?::int8 * interval '1 microsecond' then 0 else 1 end as starts
         from runs r
       ), numbered as (
         select r.*, sum(r.starts) over (${partition} rows unbounded preceding) as session from marked r
       ), sessions as (
         select (r.device_id collate "C") collate "default" as device_id, r.fence_id, min(r.first_ts) as first_ts, max(r.last_ts) as last_ts, sum(r.n)::int8 as n, max(r.user_id::text collate "C") as user_id
         from (select * from numbered r order by r.device_id collate "C", r.fence_id, r.session) r
         group by r.device_id collate "C", r.fence_id, r.session
       ) `,
      timing.thresholdUs,
    ),
  ]);
}
