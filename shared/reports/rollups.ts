import { pgArray } from '../storage/pg-array.js';
import { HOUR_MS, pendingDeviceHours, watermark, type DeviceHour, type Materialization } from './materializer.js';
import { joinSql, sqlOf, type Execute, type Sql } from './report-sql.js';
import { inlined } from './inline-sql.js';
import { ascending, binnedRuns, numbersOf } from './time-runs.js';

/**
 * Report rollups (issue 18): what visitors, positioning_time and heatmap need of a device-hour of positions,
 * kept so that a report reads a few rows per device and quarter hour instead of every position. Two tables
 * (migration m0012), both rebuilt per device-hour from the positions, so a rebuild can run twice harmlessly:
 * - `rollup_runs`: per device, building, floor, user and UTC quarter hour, the runs of positions whose
 *   consecutive gaps are at most RUN_GAP_US, each with its first and last fix (µs since the epoch) and count.
 *   Visitors sum the counts per quarter; positioning_time joins the runs into sessions of any threshold of at
 *   least RUN_GAP_US (a run's gaps are within the threshold, so sessions of the union are the runs joined where
 *   the gap between them is within it: exact, see joinRuns).
 * - `rollup_heat_cells`: per device, building, floor, indoor flag, user and UTC hour, the positions in each
 *   geohash-10 grid cell (the heatmap's own cell arithmetic, latCell / lngCell).
 * Positions without a building are kept by neither: every report served here asks for one building.
 */

/** Gaps of up to 5 s stay inside a run: a session threshold below it is answered from positions. */
export const RUN_GAP_US = 5_000_000;

/**
 * Since 1980 every IANA zone's offset is a whole number of quarter hours (test/unit/rollup-time-zones.test.ts
 * checks the tz data Intl carries), so a UTC quarter hour is one local quarter hour, within one local hour, day
 * and month, except where the offset changes inside it (a few zones changed at hh:01: visitors check for that).
 * Windows starting earlier are answered from positions, as before.
 */
export const ROLLUPS_SINCE = Date.UTC(1980, 0, 1);

export const QUARTER_MS = 15 * 60_000;

/** Rows (and columns) of the geohash-10 grid: 25 bits of latitude and 25 of longitude. */
export const GEOHASH10_ROWS = 2 ** 25;

/**
 * The geohash-10 grid cell of a position (the pole and the antimeridian belong to the last ones, as in a
 * geohash). One definition for the heatmap's raw path and the rollups: the same float arithmetic in PostgreSQL.
 */
export const latCell = (lat: string) => `least(floor((${lat} + 90) / 180 * ${GEOHASH10_ROWS}), ${GEOHASH10_ROWS - 1})::bigint`;
export const lngCell = (lng: string) => `least(floor((${lng} + 180) / 360 * ${GEOHASH10_ROWS}), ${GEOHASH10_ROWS - 1})::bigint`;

const EPOCH_BIN = `'2000-01-01T00:00:00Z'`;

/** The device-hours as `unnest` columns (organization, device, hour, and `unit`, numbering them from 1), aliased `u`. */
function unitsSql(units: readonly DeviceHour[]): Sql {
  return sqlOf(
    'unnest(?::uuid[], ?::text[], ?::timestamptz[]) with ordinality as u(organization_id, device_id, hour, unit)',
    pgArray(units.map((unit) => unit.organizationId)),
    pgArray(units.map((unit) => unit.deviceId)),
    pgArray(units.map((unit) => unit.hour.toISOString())),
  );
}

/**
 * The positions of the device-hours, as `u` and `p`: one index range scan (organization, device, ts) per
 * device-hour. Lateral and fenced (`offset 0`, or PostgreSQL flattens it into a join): given 30 device-hours,
 * the planner hashes them and scans the whole day's partition in parallel (1.3 s on a day of 30 devices, against
 * 0.15 s for the 30 index scans), a cost growing with the fleet rather than with the device-hours rebuilt.
 */
const unitPositions = (units: readonly DeviceHour[]) =>
  joinSql([
    unitsSql(units),
    " cross join lateral (select * from positions p where p.organization_id = u.organization_id and p.device_id = u.device_id and p.ts >= u.hour and p.ts < u.hour + interval '1 hour' and p.building_id is not null offset 0) p",
  ]);

export const rollupMaterialization: Materialization = {
  name: 'rollups',
  async deleteBefore(execute: Execute, cutoff: Date): Promise<void> {
    await execute(sqlOf('delete from rollup_runs where quarter < ?', cutoff.toISOString()));
    await execute(sqlOf('delete from rollup_heat_cells where hour < ?', cutoff.toISOString()));
  },
  async rebuild(execute: Execute, units: readonly DeviceHour[]): Promise<void> {
    if (units.length === 0) return;
    await execute(
      inlined(
        joinSql([
          'delete from rollup_runs r using ',
          unitsSql(units),
          " where r.organization_id = u.organization_id and r.device_id = u.device_id and r.quarter >= u.hour and r.quarter < u.hour + interval '1 hour'",
        ]),
      ),
    );
    await execute(
      inlined(
        joinSql([
          'delete from rollup_heat_cells r using ',
          unitsSql(units),
          ' where r.organization_id = u.organization_id and r.device_id = u.device_id and r.hour = u.hour',
        ]),
      ),
    );
    // A run starts at a key's first position, at a quarter hour, and wherever the gap from the previous one
    // exceeds RUN_GAP_US. PostgreSQL groups each device-hour's times per key (in the index's order) and this
    // process splits them: sorting every position for window functions cost more than the rest of the rebuild.
    const groups = await execute<{
      unit: number | string;
      building_id: number;
      floor_id: number | null;
      user_id: string | null;
      times: string;
    }>(
      inlined(
        joinSql([
          `select u.unit, p.building_id, p.floor_id, p.user_id::text as user_id, array_to_string(array_agg((extract(epoch from p.ts - u.hour) * 1000000)::int8), ',') as times
         from `,
          unitPositions(units),
          ' group by u.unit, p.building_id, p.floor_id, p.user_id',
        ]),
      ),
    );
    const runs = {
      organization: [] as string[],
      device: [] as string[],
      quarter: [] as string[],
      building: [] as number[],
      floor: [] as (number | null)[],
      user: [] as (string | null)[],
      first: [] as number[],
      last: [] as number[],
      n: [] as number[],
    };
    for (const group of groups) {
      const unit = units[Number(group.unit) - 1]!;
      const hourUs = unit.hour.getTime() * 1000;
      // A UTC hour starts on a quarter hour of date_bin's origin: quarters of the hour's times are its own.
      binnedRuns(ascending(numbersOf(group.times)), QUARTER_MS * 1000, RUN_GAP_US, (quarter, first, last, n) => {
        runs.organization.push(unit.organizationId);
        runs.device.push(unit.deviceId);
        runs.quarter.push(new Date(unit.hour.getTime() + quarter / 1000).toISOString());
        runs.building.push(group.building_id);
        runs.floor.push(group.floor_id);
        runs.user.push(group.user_id);
        runs.first.push(hourUs + first);
        runs.last.push(hourUs + last);
        runs.n.push(n);
      });
    }
    if (runs.n.length > 0) {
      await execute(
        inlined(
          sqlOf(
            `insert into rollup_runs (organization_id, device_id, quarter, building_id, floor_id, user_id, first_us, last_us, positions)
           select * from unnest(?::uuid[], ?::text[], ?::timestamptz[], ?::int[], ?::int[], ?::uuid[], ?::int8[], ?::int8[], ?::int[])`,
            pgArray(runs.organization),
            pgArray(runs.device),
            pgArray(runs.quarter),
            pgArray(runs.building),
            pgArray(runs.floor),
            pgArray(runs.user),
            pgArray(runs.first),
            pgArray(runs.last),
            pgArray(runs.n),
          ),
        ),
      );
    }
    await execute(
      inlined(
        joinSql([
          `insert into rollup_heat_cells (organization_id, device_id, hour, building_id, floor_id, indoor, user_id, lat_cell, lng_cell, positions)
         select p.organization_id, p.device_id, u.hour, p.building_id, p.floor_id, p.indoor, p.user_id, ${latCell('p.lat')}, ${lngCell('p.lng')}, count(*)::int
         from `,
          unitPositions(units),
          ' group by 1, 2, 3, 4, 5, 6, 7, 8, 9',
        ]),
      ),
    );
  },
};

/** A run of one device's positions: first and last fix (µs after a report's origin) and how many. */
export interface Run {
  first: number;
  last: number;
  n: number;
}

/**
 * Sessions from runs whose own gaps are within the threshold, in any order: sorted by their first fix, a run
 * joins the session before it when it starts at most `thresholdUs` after the latest fix seen so far. Exact:
 * no position lies between that latest fix and the next run's first (runs starting earlier end by then), so
 * that is a gap between consecutive positions, which is what splits sessions.
 */
export function joinRuns(runs: readonly Run[], thresholdUs: number): Run[] {
  const sorted = [...runs].sort((a, b) => a.first - b.first);
  const joined: Run[] = [];
  for (const run of sorted) {
    const last = joined[joined.length - 1];
    if (last && run.first - last.last <= thresholdUs) {
      last.last = Math.max(last.last, run.last);
      last.n += run.n;
    } else joined.push({ first: run.first, last: run.last, n: run.n });
  }
  return joined;
}

/**
 * Late device-hours are read with an index scan each, which reads a device-hour's rows out of order: about 20
 * times a row's cost in the plain scan (measured: 2,400 device-hours of a day of 100 devices took 30 times
 * count(*), the plain scan 1.3 times; 1,200 read in one hashed scan beside the rollups still took twice the plain
 * scan, which PostgreSQL then runs in one process). So past one per hour of the kept span (or this many, which
 * cost little in any window) the window is read from positions only: never slower than the raw path for a fleet
 * of 20 devices or more, and a smaller fleet's day is small to scan.
 */
const INDEX_SCANS_MIN = 16;

/**
 * How a report window is served: whole `unit`s inside it (quarter hours or hours) from the rollups, except
 * device-hours still pending; those and the window's ragged edges from positions. The sources partition the
 * window's positions: each is read exactly once.
 * Pending comes in two kinds. Hours not closed at the materializer's watermark (the open hour; every hour before
 * the first pass) are pending whole: they are read as a range of time, like the edges (`innerTo` stops where they
 * start), so a window that is all pending is the plain raw path and never one index scan per device-hour. The
 * device-hours of closed hours that received rows since the watermark (late fixes) are listed one by one.
 */
export class RollupWindow {
  private constructor(
    readonly from: string,
    readonly to: string,
    readonly innerFrom: string,
    readonly innerTo: string,
    readonly pending: readonly DeviceHour[],
  ) {}

  /**
   * Null when the rollups cannot serve the window (it starts before 1980, or holds no whole unit), hold nothing
   * of it yet (every whole unit is in an hour not closed at the watermark), or too many of its device-hours are
   * late (INDEX_SCANS_MIN): the report reads positions only.
   */
  static async plan(execute: Execute, organizationId: string, from: string, to: string, unitMs: number): Promise<RollupWindow | null> {
    const fromMs = Date.parse(from);
    const toMs = Date.parse(to);
    if (fromMs < ROLLUPS_SINCE) return null;
    const innerFrom = Math.ceil(fromMs / unitMs) * unitMs;
    const since = await watermark(execute);
    // An hour start is a unit start (a unit divides an hour), so the kept part still ends on a unit.
    const innerTo = Math.min(Math.floor(toMs / unitMs) * unitMs, Math.floor(since / HOUR_MS) * HOUR_MS);
    if (!(innerFrom < innerTo)) return null;
    const pending = await pendingDeviceHours(execute, organizationId, new Date(innerFrom), new Date(innerTo), since);
    if (pending.length > Math.max(INDEX_SCANS_MIN, (innerTo - innerFrom) / HOUR_MS)) return null;
    return new RollupWindow(from, to, new Date(innerFrom).toISOString(), new Date(innerTo).toISOString(), pending);
  }

  private pendingUnits(): Sql {
    return sqlOf(
      'unnest(?::text[], ?::timestamptz[]) as u(device_id, hour)',
      pgArray(this.pending.map((unit) => unit.deviceId)),
      pgArray(this.pending.map((unit) => unit.hour.toISOString())),
    );
  }

  /**
   * Rollup rows, aliased `p` (their columns are named as the positions'): `from` text for a statement, with
   * `conditions` on p, the whole units of the window (`time`: the table's unit column) and no pending hour.
   */
  rollupSource(table: 'rollup_runs' | 'rollup_heat_cells', conditions: Sql): Sql {
    const time = table === 'rollup_runs' ? 'p.quarter' : 'p.hour';
    const hour = table === 'rollup_runs' ? `date_bin('1 hour', p.quarter, ${EPOCH_BIN})` : 'p.hour';
    return joinSql([
      `${table} p where `,
      conditions,
      sqlOf(` and ${time} >= ? and ${time} < ?`, this.innerFrom, this.innerTo),
      ...(this.pending.length > 0
        ? [' and not exists (select 1 from ', this.pendingUnits(), ` where u.device_id = p.device_id and u.hour = ${hour})`]
        : []),
    ]);
  }

  /** Positions outside the rollups, aliased `p`: `from` texts, one per edge of the window and one for the pending device-hours. */
  rawSources(conditions: Sql): Sql[] {
    const sources: Sql[] = [];
    for (const [from, to] of [
      [this.from, this.innerFrom],
      [this.innerTo, this.to],
    ] as const) {
      if (Date.parse(from) < Date.parse(to))
        sources.push(joinSql(['positions p where ', conditions, sqlOf(' and p.ts >= ? and p.ts < ?', from, to)]));
    }
    if (this.pending.length > 0) {
      sources.push(
        joinSql([
          this.pendingUnits(),
          " join positions p on p.device_id = u.device_id and p.ts >= u.hour and p.ts < u.hour + interval '1 hour' where ",
          conditions,
          sqlOf(' and p.ts >= ? and p.ts < ?', this.innerFrom, this.innerTo),
        ]),
      );
    }
    return sources;
  }

  /** The same positions as one condition on p (for re-reading some of them by device and time). */
  rawWhere(conditions: Sql): Sql {
    const pending =
      this.pending.length > 0
        ? [
            ' or exists (select 1 from ',
            this.pendingUnits(),
            " where u.device_id = p.device_id and p.ts >= u.hour and p.ts < u.hour + interval '1 hour')",
          ]
        : [];
    return joinSql([
      conditions,
      sqlOf(' and p.ts >= ? and p.ts < ? and (p.ts < ? or p.ts >= ?', this.from, this.to, this.innerFrom, this.innerTo),
      ...pending,
      ')',
    ]);
  }
}
