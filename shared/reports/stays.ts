import { pgArray } from '../storage/pg-array.js';
import { FenceGrid, shapesOf, type FenceRow, type FenceShape } from './fence-grid.js';
import { HOUR_MS, pendingDeviceHours, watermark, type DeviceHour, type Materialization } from './materializer.js';
import { joinSql, sqlOf, type Execute, type Sql } from './report-sql.js';
import { LruCache } from '../lru-cache.js';
import { inlined } from './inline-sql.js';
import { keyedRuns, numbersOf } from './time-runs.js';
import { addWindow, pushTo, type SessionWindows, type Position, type Run, type Window, type WindowRow } from './session-windows.js';

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
  const hits = joinSql(
    layers.map((layer) => joinSql([grid.hit(layer), ` as k${layer}`])),
    ', ',
  );
  const shapesOfRow = (row: Record<string, unknown>) =>
    layers
      .map((layer) => Number(row[`k${layer}`]))
      .filter((n) => n !== 0)
      .map((n) => grid.shapes[n - 1]!);
  const inGrid = joinSql([where, ' and ', positionsInGrid(grid)]);
  const rows = await execute<WindowRow>(
    joinSql([
      'select p.device_id, p.user_id::text as user_id, ',
      hits,
      ', ',
      timing.aggregates,
      ' from ',
      source,
      ' where ',
      inGrid,
      ` group by p.device_id, p.user_id, ${layers.map((layer) => `k${layer}`).join(', ')}, `,
      timing.window,
    ]),
  );
  const windows = new Map<string, Window>();
  for (const row of rows) for (const shape of shapesOfRow(row)) addWindow(windows, timing, `${row.device_id}\u0000${shape.fenceId}`, row);
  return timing.sessions(windows.values(), async (wanted) => {
    const exact = new Map<string, Position[]>();
    // biome-ignore lint/suspicious/noExplicitAny: report rows hold the columns named by the report's column list (report-columns.ts)
    for (const row of await execute<Record<string, any>>(
      timing.reread(joinSql(['p.device_id, p.user_id::text as user_id, ', hits]), inGrid, wanted),
    )) {
      const t = Number(row.t);
      for (const shape of shapesOfRow(row))
        pushTo(exact, `${row.device_id}\u0000${shape.fenceId}\u0000${Math.floor(t / timing.windowUs)}`, { t, user: row.user_id });
    }
    return exact;
  });
}

/** Positions on the grid's floors and in a cell of some geofence (which also rules out a null x or y). */
function positionsInGrid(grid: FenceGrid): Sql {
  const floors =
    grid.floorIds.length === 1 ? sqlOf('p.floor_id = ?', grid.floorIds[0]) : sqlOf('p.floor_id = any(?::int[])', pgArray(grid.floorIds));
  return joinSql([floors, ' and ', grid.candidate]);
}

/**
 * Rebuilds the stay segments of device-hours: deletes what was kept for them and stores the runs their
 * positions make in every geofence of the organization (deleted ones too: a report can still name them),
 * against each geofence's current geometry version. One statement per organization finds each position's
 * shapes (the grid's cell entries, the shapes a cell only partly covers tested by PostgreSQL's own operators)
 * and sends, per device-hour, user and building, those hits (time and shape) as one list of numbers, in the
 * order the index gave them (by time, else they are sorted here); this process splits them into runs by
 * time (a gap over STAYS_THRESHOLD_S starts one, exactly as `lag` over the time would) and inserts them with
 * one unnest. Sorting a row per position and shape for window functions cost PostgreSQL about 8 µs per
 * position, more than everything else together. The grid of an organization's fences is kept while they
 * stay as they are.
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
    const fences = await execute<FenceRow>(
      sqlOf(
        'select id, name, floor_id, type, cartesians, radius, geometry_version, geometry_since from geofences where organization_id = ? order by id',
        organizationId,
      ),
    );
    const grid = rebuildGrid(organizationId, fences);
    if (!grid) continue;
    // Device-hours by number (`unit`). Shapes are hash-joined by number: the planner would rather merge-join
    // (sorting every entry to join 1,000 shapes) or sort to group; planned without either, the index's time
    // order also reaches this process. Joining on xid (hash only) kept merge joins out too, but casting every
    // entry through text cost about 1.5 µs per position.
    // A hit travels as one number, its time (µs into the hour) times `base` plus its shape: half the numbers to print
    // and to read of a time and a shape each (exact: 3.6e9 µs x a million shapes stays below 2^53).
    // Cells' covering shapes come as one entry per distinct set of them (a number after the shapes'), which
    // this process expands: a position brings one row for them, not one per shape to hash-join and aggregate.
    const base = Math.max(grid.fenceIds.length + 1, grid.sets.length);
    if (base > 2_000_000)
      throw new Error(
        `${grid.fenceIds.length} geofence shapes and ${base - grid.fenceIds.length - 1} sets of them covering a cell: too many for a hit to be one exact number`,
      );
    const groups = await withPlanner(
      execute,
      { enable_mergejoin: 'off', enable_sort: 'off', max_parallel_workers_per_gather: '0' },
      (execute) =>
        execute<{ unit: number | string; user_id: string | null; building_id: number | null; hits: string }>(
          inlined(
            joinSql([
              `select p.unit, p.user_id::text as user_id, p.building_id, array_to_string(array_agg(p.us * ${base} + abs(p.entry)), ',') as hits
         from (
           select u.unit, p.user_id, p.building_id, p.us, p.floor_id, p.x, p.y, unnest(`,
              grid.entries,
              sqlOf(
                `) as entry
           from unnest(?::text[], ?::timestamptz[]) with ordinality as u(device_id, hour, unit)
           cross join lateral (
             select p.user_id, p.building_id, p.floor_id, p.x, p.y, (extract(epoch from p.ts - u.hour) * 1000000)::int8 as us
             from positions p
             where p.organization_id = ? and p.device_id = u.device_id and p.ts >= u.hour and p.ts < u.hour + interval '1 hour' and `,
                devices,
                hours,
                organizationId,
              ),
              grid.inGrid,
              `
             offset 0
           ) p
         ) p
         left join `,
              grid.relation,
              ` on f.n = -p.entry
         where p.entry > 0 or ${FenceGrid.inShape}
         group by p.unit, p.user_id, p.building_id`,
            ]),
          ),
        ),
    );
    const segments = {
      unit: [] as number[],
      shape: [] as number[],
      user: [] as (string | null)[],
      building: [] as (number | null)[],
      first: [] as number[],
      last: [] as number[],
      n: [] as number[],
    };
    for (const group of groups) {
      keyedRuns(
        numbersOf(group.hits),
        base,
        STAYS_THRESHOLD_US,
        (shape, first, last, n) => {
          segments.unit.push(Number(group.unit));
          segments.shape.push(shape);
          segments.user.push(group.user_id);
          segments.building.push(group.building_id);
          segments.first.push(first);
          segments.last.push(last);
          segments.n.push(n);
        },
        grid.sets,
      );
    }
    if (segments.n.length === 0) continue;
    await execute(
      inlined(
        sqlOf(
          `insert into geofence_stays (organization_id, device_id, hour, fence_id, geometry_version, user_id, building_id, first_ts, last_ts, positions)
         select ?::uuid, u.device_id, u.hour, (?::uuid[])[s.shape], (?::int[])[s.shape], s.user_id, s.building_id,
                u.hour + s.first_us * interval '1 microsecond', u.hour + s.last_us * interval '1 microsecond', s.n
         from unnest(?::int[], ?::int[], ?::uuid[], ?::int[], ?::int8[], ?::int8[], ?::int[]) as s(unit, shape, user_id, building_id, first_us, last_us, n)
         join unnest(?::text[], ?::timestamptz[]) with ordinality as u(device_id, hour, unit) on u.unit = s.unit`,
          organizationId,
          pgArray(grid.fenceIds),
          grid.versions,
          pgArray(segments.unit),
          pgArray(segments.shape),
          pgArray(segments.user),
          pgArray(segments.building),
          pgArray(segments.first),
          pgArray(segments.last),
          pgArray(segments.n),
          devices,
          hours,
        ),
      ),
    );
  }
}

/** Runs `run` with these planner settings, in the caller's transaction, then puts back what they were. */
async function withPlanner<T>(execute: Execute, settings: Record<string, string>, run: (execute: Execute) => Promise<T>): Promise<T> {
  const names = Object.keys(settings);
  const [previous] = await execute<Record<string, string>>(
    sqlOf(
      `select ${names.map((name, i) => `current_setting('${name}') as s${i}, set_config('${name}', ?, true)`).join(', ')}`,
      ...names.map((name) => settings[name]),
    ),
  );
  const result = await run(execute);
  await execute(
    sqlOf(`select ${names.map((name) => `set_config('${name}', ?, true)`).join(', ')}`, ...names.map((_, i) => previous![`s${i}`])),
  );
  return result;
}

/** A gap of at most this (µs) stays inside a segment (STAYS_THRESHOLD_S, as `make_interval(secs => ...)` is exact). */
const STAYS_THRESHOLD_US = STAYS_THRESHOLD_S * 1_000_000;

/**
 * The rebuild's grid has 4 times the cells of a report's (1 m instead of 2 m for 1,000 fences on a 200 m floor):
 * about half the shapes to test per position (94,000 entries instead of 152,000 for the bench's 36,000
 * positions), for a grid built in 0.4 s instead of 0.2 s, once while the fences stay as they are, and 0.9 MB of
 * SQL per statement instead of 0.3 (only the cells that hold entries cost entries, and covering sets are one).
 */
const REBUILD_MAX_CELLS = 800_000;

/** What the rebuild sends of an organization's fence grid, with the fences it was built from (as text). */
interface RebuildGrid {
  fences: string;
  entries: Sql;
  inGrid: Sql;
  relation: Sql;
  /** Shape numbers index these (from 1). */
  fenceIds: string[];
  /** The shape numbers each entry past them stands for (see FenceGrid.coveredEntries). */
  sets: number[][];
  versions: string;
}

/**
 * The grid of the rebuild's organizations, kept while their fences are unchanged, its arrays inlined (see
 * inline-sql.ts): building it for 1,000 fences costs this process about 0.1 s, and MikroORM's escaping of its
 * 0.6 MB of arrays as much again at every statement, as much as rebuilding tens of thousands of positions.
 */
const rebuildGrids = new LruCache<string, RebuildGrid>({ maxEntries: 16 });

function rebuildGrid(organizationId: string, fences: FenceRow[]): RebuildGrid | undefined {
  const key = JSON.stringify(
    fences.map((fence) => [fence.id, fence.floor_id, fence.type, fence.cartesians, fence.radius, fence.geometry_version]),
  );
  const kept = rebuildGrids.get(organizationId);
  if (kept?.fences === key) return kept;
  const { shapes } = shapesOf(fences);
  if (shapes.length === 0) {
    rebuildGrids.delete(organizationId);
    return undefined;
  }
  const grid = FenceGrid.for(shapes, REBUILD_MAX_CELLS);
  const { entries, sets } = grid.coveredEntries();
  const built: RebuildGrid = {
    fences: key,
    entries: inlined(entries),
    sets,
    inGrid: inlined(positionsInGrid(grid)),
    relation: inlined(grid.relation),
    fenceIds: grid.shapes.map((shape) => shape.fenceId),
    versions: pgArray(grid.shapes.map((shape) => shape.version)),
  };
  rebuildGrids.set(organizationId, built);
  return built;
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
  for (const unit of await pendingDeviceHours(execute, query.organizationId, new Date(start), new Date(end), kept))
    pending.set(`${unit.deviceId}\u0000${unit.hour.getTime()}`, { device: unit.deviceId, hour: unit.hour.getTime() });
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
  const segments = keptSegments(
    query,
    shapes.map((shape) => ({ shape, cutoff: cutoffOf(shape) })),
    end,
    [...pending.values()],
  );
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
      if (Number(hour) >= cutoff)
        pieces.push(
          sqlOf(
            'p.ts >= ? and p.ts < ? and p.device_id = any(?::text[])',
            iso(Number(hour)),
            iso(Number(hour) + HOUR_MS),
            pgArray(devices),
          ),
        );
    }
    if (pieces.length === 0) continue;
    const source = joinSql([
      '(',
      joinSql(
        pieces.map((piece) => joinSql(['select * from positions p where ', query.where, ' and ', piece])),
        ' union all ',
      ),
      ') p',
    ]);
    const where = joinSql([
      query.where,
      ' and (',
      joinSql(
        pieces.map((piece) => joinSql(['(', piece, ')'])),
        ' or ',
      ),
      ')',
    ]);
    for (const [key, list] of await fenceRuns(execute, FenceGrid.for(group), timing, source, where))
      for (const run of list) pushTo(raw, key, run);
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
function keptSegments(
  query: StaysQuery,
  fences: { shape: FenceShape; cutoff: number }[],
  end: number,
  pending: { device: string; hour: number }[],
): Sql | undefined {
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
            joinSql([
              '(',
              arm.cutoff > from ? sqlOf('s.hour >= ? and ', iso(arm.cutoff)) : '',
              sqlOf('s.geometry_version = ? and s.fence_id = any(?::uuid[]))', arm.version, pgArray(arm.fences)),
            ]),
          ),
          ' or ',
        ),
        ')',
        query.staysWhere,
        ...(excluded.length > 0
          ? [
              sqlOf(
                ' and (s.device_id, s.hour) not in (select * from unnest(?::text[], ?::timestamptz[]))',
                pgArray(excluded.map((unit) => unit.device)),
                pgArray(excluded.map((unit) => iso(unit.hour))),
              ),
            ]
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
