import { ValidationError } from '../errors.js';
import { decodeGeohashCenter, encodeGeohash } from '../geo/geohash.js';
import { pgArray } from '../storage/pg-array.js';
import type { Storage } from '../storage/storage.js';
import { FenceGrid, fenceShapes } from './fence-grid.js';
import { epochSecond, formatInstant, instantFormatter } from './instant-format.js';
import type { ReportColumn, ReportName, ReportScope } from './report-params.js';
import { REPORT_COLUMNS } from './report-columns.js';
import type { JobLimits } from '../jobs/job-queue.js';
import {
  inBoundedTransaction,
  inReportTransaction,
  intervalMicros,
  joinSql,
  originOf,
  sqlOf,
  UNBOUNDED,
  type Execute,
  type Params,
  type Sql,
} from './report-sql.js';
import { HOUR_MS } from './materializer.js';
import { fenceRuns, sessionsSql, staysPlan } from './stays.js';
import { GEOHASH10_ROWS, joinRuns, latCell, lngCell, QUARTER_MS, RollupWindow, ROLLUPS_SINCE, RUN_GAP_US, type Run } from './rollups.js';
import { addWindow, pushTo, SessionWindows, type Position, type Window, type WindowRow } from './session-windows.js';

export interface QueryResult {
  meta: ReportColumn[];
  rows: unknown[][];
  rowsRead: number;
  /**
   * Distinct people behind each row, where no column of the row says it (positioning_time counts devices): what a
   * pseudonymous report's minimum group size is checked against (pseudonymize.ts).
   */
  people?: number[];
}

/** `raw`: from positions only, never from what is materialised: the reference the materialised paths must equal. */
export interface ReportOptions {
  raw?: boolean;
}

/** `limits`: the job's deadline and abort signal, which bound the report's statements (see inBoundedTransaction). */
type Query = (storage: Storage, params: Params, scope: ReportScope, limits?: JobLimits, options?: ReportOptions) => Promise<QueryResult>;

/** The local bucket a timestamp falls in, computed by PostgreSQL in the report's time zone (DST included). */
function bucketSql(group: string, column = 'p.ts'): string {
  const local = `(${column} at time zone ?::text)`;
  switch (group) {
    case 'month':
      return `to_char(${local}, 'YYYY-MM')`;
    case 'hour':
      return `to_char(${local}, 'YYYY-MM-DD HH24:00')`;
    case 'day_of_week':
      return `extract(isodow from ${local})::int::text`;
    default:
      return `to_char(${local}, 'YYYY-MM-DD')`;
  }
}
const DAY_NAMES = ['', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];

/** The WHERE every report starts from: organization, time window, and a plain user's own positions only. */
function baseFilter(scope: ReportScope, params: Params) {
  const where = ['p.organization_id = ?', 'p.ts >= ?', 'p.ts < ?'];
  const values: unknown[] = [scope.organizationId, params.from_date, params.to_date];
  if (new Date(params.to_date) <= new Date(params.from_date))
    throw new ValidationError([{ field: 'to_date', message: 'must be after from_date' }]);
  if (scope.onlyUserId) {
    where.push('p.user_id = ?');
    values.push(scope.onlyUserId);
  }
  const add = (condition: string, ...more: unknown[]) => {
    where.push(condition);
    values.push(...more);
  };
  return { where, values, add };
}

function checkOrganization(params: Params, scope: ReportScope): void {
  if (params.organization_id !== undefined && params.organization_id !== scope.organizationId) {
    throw new ValidationError([{ field: 'organization_id', message: 'not your organization' }]);
  }
}

/**
 * Stays of devices in geofences against the geofences' current geometry, as the `sessions` of sessionsSql
 * (stays.ts) for the report to select from: the grid (FenceGrid) tells which geofences each position is in, and
 * one parallel aggregation groups positions per device, geofence and window (SessionWindows). Where stay
 * segments kept as positions arrived answer exactly (stays.ts), PostgreSQL reads and joins them with the runs of
 * the rest of the window, computed from positions; both paths end in the same statement, so they give the same
 * rows. A position counts as stored: one uploaded twice counts twice, as in every other report.
 */
async function fenceSessions<T>(
  storage: Storage,
  params: Params,
  scope: ReportScope,
  limits: JobLimits,
  options: ReportOptions,
  select: (sessions: Sql, timing: SessionWindows) => Sql,
): Promise<{ rows: T[]; names: Map<string, string>; originMs: number }> {
  checkOrganization(params, scope);
  const { shapes, names } = await fenceShapes(storage, scope, params);
  const originMs = Date.parse(params.from_date);
  if (shapes.length === 0) return { rows: [], names, originMs };
  const filter = baseFilter(scope, params);
  // The same filters on stay segments `s`, which keep user, device and building.
  const onStays: Sql[] = scope.onlyUserId ? [sqlOf(' and s.user_id = ?', scope.onlyUserId)] : [];
  // `= any(array)` costs a few % of the scan per position; one building, the usual case, is a plain `=`.
  if (params.building_ids?.length === 1) filter.add('p.building_id = ?', params.building_ids[0]);
  else if (params.building_ids) filter.add('p.building_id = any(?::int[])', pgArray(params.building_ids));
  if (params.building_ids) onStays.push(sqlOf(' and s.building_id = any(?::int[])', pgArray(params.building_ids)));
  if (params.device_ids) filter.add('p.device_id = any(?::text[])', pgArray(params.device_ids));
  if (params.device_ids) onStays.push(sqlOf(' and s.device_id = any(?::text[])', pgArray(params.device_ids)));
  if (params.user_ids) filter.add('p.user_id = any(?::uuid[])', pgArray(params.user_ids));
  if (params.user_ids) onStays.push(sqlOf(' and s.user_id = any(?::uuid[])', pgArray(params.user_ids)));
  if (params.only_assigned) {
    filter.add(
      'exists (select 1 from devices d where d.organization_id = p.organization_id and d.identifier = p.device_id and d.user_id is not null)',
    );
    onStays.push(
      sqlOf(
        ' and exists (select 1 from devices d where d.organization_id = s.organization_id and d.identifier = s.device_id and d.user_id is not null)',
      ),
    );
  }
  const where = sqlOf(filter.where.join(' and '), ...filter.values);

  return inReportTransaction(storage, limits, async (execute) => {
    const origin = await originOf(execute, params, where);
    const timing = new SessionWindows(params.session_threshold, origin, (Date.parse(params.to_date) - Date.parse(origin)) * 1000);
    const fromStays = options.raw
      ? undefined
      : await staysPlan(execute, {
          organizationId: scope.organizationId,
          from: Date.parse(params.from_date),
          to: Date.parse(params.to_date),
          shapes,
          timing,
          where,
          staysWhere: joinSql(onStays),
        });
    // The grid costs a few hundred ms to build for a floor of zones: only for a report computed from positions.
    const raw = fromStays?.raw ?? (await fenceRuns(execute, FenceGrid.for(shapes), timing, sqlOf('positions p'), where));
    // A month is hundreds of thousands of segments: sorted and grouped in memory rather than on disk. One process:
    // the kept segments arrive in order (sessionsSql), and a parallel plan would gather them unordered to sort them.
    await execute(sqlOf(`select set_config('work_mem', '128MB', true), set_config('max_parallel_workers_per_gather', '0', true)`));
    const rows = await execute<T>(joinSql([sessionsSql(timing, raw, fromStays?.kept), select(stayFilter(params), timing)]));
    return { rows, names, originMs: Date.parse(origin) };
  });
}

/** `sessions s` within the report's min_stay_time / max_stay_time (durations compared as the seconds they are reported in). */
function stayFilter(params: Params): Sql {
  const conditions: Sql[] = [];
  // extract gives the exact decimal seconds, and the cast the double nearest to them, as µs / 1e6 does in JS.
  const seconds = 'extract(epoch from s.last_ts - s.first_ts)::float8';
  if (params.min_stay_time !== undefined) conditions.push(sqlOf(`${seconds} >= ?::float8`, params.min_stay_time));
  if (params.max_stay_time !== undefined) conditions.push(sqlOf(`${seconds} <= ?::float8`, params.max_stay_time));
  return joinSql(['sessions s', ...(conditions.length > 0 ? [' where ', joinSql(conditions, ' and ')] : [])]);
}

const geofencingSessionsMatches: Query = async (storage, params, scope, limits = UNBOUNDED, options = {}) => {
  // As `order by min(ts), device_id, fence_id::text`.
  const { rows, names, originMs } = await fenceSessions<{
    device_id: string;
    fence_id: string;
    first_us: string;
    last_us: string;
    n: string;
    user_id: string | null;
  }>(storage, params, scope, limits, options, (sessions, timing) =>
    joinSql([
      'select s.device_id, s.fence_id::text as fence_id, ',
      timing.offset('s.first_ts'),
      ' as first_us, ',
      timing.offset('s.last_ts'),
      ' as last_us, s.n, s.user_id from ',
      sessions,
      ' order by s.first_ts, s.device_id, s.fence_id',
    ]),
  );
  // A month is hundreds of thousands of stays: their instants formatted from cached minutes, as raw_data's are.
  const instant = instantFormatter(params.time_zone);
  return {
    meta: REPORT_COLUMNS.geofencing_sessions_matches,
    rows: rows.map((s) => [
      s.device_id,
      s.user_id,
      s.fence_id,
      names.get(s.fence_id) ?? '',
      instant(epochSecond(originMs, Number(s.first_us))),
      instant(epochSecond(originMs, Number(s.last_us))),
      (Number(s.last_us) - Number(s.first_us)) / 1e6,
      Number(s.n),
    ]),
    rowsRead: rows.reduce((sum, s) => sum + Number(s.n), 0),
  };
};

const MINUTE_MS = 60_000;

/**
 * The groups of stay_time in a window, as the label of the local day or hour (`YYYY-MM-DD`, `YYYY-MM-DD HH:00`)
 * an instant falls in: `labels[0]` from the window's start, `labels[i]` from `starts[i - 1]` (the first ms with
 * that label). Found minute by minute, and to the ms where the label changes (local days and hours start on
 * whole minutes of UTC since 1972, and at most once a minute ever), so PostgreSQL places a stay by a binary
 * search (width_bucket) instead of converting each stay to local time.
 */
function localGroups(fromMs: number, toMs: number, timeZone: string, group: string): { starts: number[]; labels: string[] } {
  const label = (ms: number) => {
    const local = formatInstant(new Date(ms), timeZone).replace('T', ' ');
    return group === 'hour' ? `${local.slice(0, 13)}:00` : local.slice(0, 10);
  };
  const labels = [label(fromMs)];
  const starts: number[] = [];
  for (let before = fromMs, at = Math.floor(fromMs / MINUTE_MS) * MINUTE_MS + MINUTE_MS; before < toMs - 1; at += MINUTE_MS) {
    const t = Math.min(at, toMs - 1);
    if (label(t) !== labels[labels.length - 1]) {
      let low = before;
      let high = t;
      while (high - low > 1) {
        const middle = Math.floor((low + high) / 2);
        if (label(middle) === labels[labels.length - 1]) low = middle;
        else high = middle;
      }
      starts.push(high);
      labels.push(label(high));
    }
    before = t;
  }
  return { starts, labels };
}

/**
 * Stay time per group (the local day or hour a stay began), device and geofence, grouped in PostgreSQL: a month
 * is hundreds of thousands of stays, its groups tens of thousands. The group's user is its first stay's; its
 * time, the stays' durations added up exactly (in µs).
 */
const geofencingStayTime: Query = async (storage, params, scope, limits = UNBOUNDED, options = {}) => {
  const groups = localGroups(Date.parse(params.from_date), Date.parse(params.to_date), params.time_zone, params.group);
  // Stays are grouped by the rank of their label among the window's labels (a label can recur, after a clock
  // went back across a day or hour), which orders the rows as the labels do.
  const labels = [...new Set(groups.labels)].sort();
  const rankOf = new Map(labels.map((label, rank) => [label, rank]));
  const { rows, names, originMs } = await fenceSessions<{
    rank: number;
    device_id: string;
    fence_id: string;
    user_id: string | null;
    sessions: number;
    total_us: string;
    first_us: string;
    last_us: string;
    n: string;
  }>(storage, params, scope, limits, options, (sessions, timing) =>
    joinSql([
      `select g.rank, g.device_id collate "C" as device_id, g.fence_id::text as fence_id, (array_agg(g.user_id order by g.first_ts))[1] as user_id, count(*)::int as sessions,
                (extract(epoch from sum(g.last_ts - g.first_ts)) * 1000000)::int8 as total_us, `,
      timing.offset('min(g.first_ts)'),
      ' as first_us, ',
      timing.offset('max(g.last_ts)'),
      // Sessions come per device and geofence in time order (sessionsSql): ordering each one's few hundred by
      // group is an incremental sort, and groups are then aggregated as they stream, not hashed and sorted.
      ' as last_us, sum(g.n)::int8 as n from (',
      sqlOf(
        'select (?::int[])[width_bucket(s.first_ts, ?::timestamptz[]) + 1] as rank, s.* from ',
        pgArray(groups.labels.map((label) => rankOf.get(label)!)),
        pgArray(groups.starts.map((ms) => new Date(ms).toISOString())),
      ),
      sessions,
      ' order by s.device_id collate "C", s.fence_id, rank, s.first_ts) g group by g.device_id collate "C", g.fence_id, g.rank order by g.rank, g.device_id collate "C", min(g.first_ts), g.fence_id',
    ]),
  );
  const instant = instantFormatter(params.time_zone);
  return {
    meta: REPORT_COLUMNS.geofencing_stay_time,
    rows: rows.map((r) => [
      labels[r.rank],
      r.device_id,
      r.user_id,
      r.fence_id,
      names.get(r.fence_id) ?? '',
      r.sessions,
      Number(r.total_us) / 1e6,
      instant(epochSecond(originMs, Number(r.first_us))),
      instant(epochSecond(originMs, Number(r.last_us))),
    ]),
    rowsRead: rows.reduce((sum, r) => sum + Number(r.n), 0),
  };
};

const TRUNCATE: Record<string, { unit: string; format: string }> = {
  month: { unit: 'month', format: 'YYYY-MM' },
  day: { unit: 'day', format: 'YYYY-MM-DD' },
  hour: { unit: 'hour', format: 'YYYY-MM-DD HH24:00' },
};

/**
 * A report's conditions other than its window, on columns that positions and the rollups share (both aliased
 * `p`): organization, a plain user's own rows only, and what the report adds. Refuses a backwards window.
 */
function rowFilter(scope: ReportScope, params: Params) {
  baseFilter(scope, params);
  const where = ['p.organization_id = ?'];
  const values: unknown[] = [scope.organizationId];
  if (scope.onlyUserId) {
    where.push('p.user_id = ?');
    values.push(scope.onlyUserId);
  }
  return {
    add(condition: string, ...more: unknown[]) {
      where.push(condition);
      values.push(...more);
    },
    sql: () => sqlOf(where.join(' and '), ...values),
  };
}

/** Positions of the whole window, as `from` text (the raw path). */
const windowPositions = (conditions: Sql, params: Params) =>
  joinSql(['positions p where ', conditions, sqlOf(' and p.ts >= ? and p.ts < ?', params.from_date, params.to_date)]);

/** The rollups (rollups.ts) serve a window from 1980 on, unless asked for the raw path; null: positions only. */
async function rollupPlan(
  execute: Execute,
  scope: ReportScope,
  params: Params,
  unitMs: number,
  options: ReportOptions,
): Promise<RollupWindow | null> {
  return options.raw ? null : RollupWindow.plan(execute, scope.organizationId, params.from_date, params.to_date, unitMs);
}

/**
 * Whether a UTC quarter hour of the window lies in two local buckets. Since 1980 every offset is a whole number
 * of quarter hours, but a few zones changed it at a minute past (America/Goose_Bay, St_Johns and Moncton until
 * 2011, Asia/Gaza and Hebron in 2010-2011, Antarctica/Casey in 2020-2022): the quarter holding such a change
 * starts in one local hour (or day) and ends in another. Checked in PostgreSQL's own time-zone data, one row per
 * quarter of the window.
 */
async function offsetChangesInsideAQuarter(execute: Execute, params: Params, unit: string): Promise<boolean> {
  const local = (instant: string) => `date_trunc('${unit}', ${instant} at time zone ?::text)`;
  const [row] = await execute<{ straddles: boolean }>(
    sqlOf(
      `select exists (
         select 1 from generate_series(date_bin('15 minutes', ?::timestamptz, '2000-01-01T00:00:00Z'), ?::timestamptz - interval '1 microsecond', interval '15 minutes') as q
         where ${local('q')} <> ${local("(q + interval '15 minutes' - interval '1 microsecond')")}
       ) as straddles`,
      params.from_date,
      params.to_date,
      params.time_zone,
      params.time_zone,
    ),
  );
  return row!.straddles;
}

/**
 * Unique visitors (a user, or a device without one) per local month, day or hour. Positions are grouped per
 * quarter hour of UTC and visitor first (a parallel hash aggregate), and only those groups are placed in their
 * local bucket: every local hour, day and month starts on a UTC quarter hour, so no quarter straddles two
 * buckets, and the time-zone conversion runs once per quarter instead of once per position (half the time
 * of a day of 8.64M positions in Europe/Madrid). Before 1980 some zones had offsets such as -00:44:30, and a
 * few later changed offset at a minute past a quarter (offsetChangesInsideAQuarter), so such windows place each
 * position itself. A count(distinct) straight over every position would sort them all.
 * Whole quarters come from the rollups' runs (their counts per quarter, device and user are these groups);
 * the window's edges and pending device-hours from positions.
 */
const visitors: Query = async (storage, params, scope, limits = UNBOUNDED, options = {}) => {
  const filter = rowFilter(scope, params);
  filter.add('p.building_id = ?', params.building_id);
  if (params.floor_id) filter.add('p.floor_id = ?', params.floor_id);
  const conditions = filter.sql();
  const { unit, format } = TRUNCATE[params.group]!;
  const localBucket = (instant: string) => sqlOf(`date_trunc('${unit}', ${instant} at time zone ?::text)`, params.time_zone);
  const rows = await inReportTransaction(storage, limits, async (execute) => {
    const quarters = Date.parse(params.from_date) >= ROLLUPS_SINCE && !(await offsetChangesInsideAQuarter(execute, params, unit));
    const plan = quarters ? await rollupPlan(execute, scope, params, QUARTER_MS, options) : null;
    const at = quarters ? sqlOf(`date_bin('15 minutes', p.ts, '2000-01-01T00:00:00Z')`) : localBucket('p.ts');
    const groups = [
      ...(plan ? plan.rawSources(conditions) : [windowPositions(conditions, params)]).map((source) =>
        joinSql(['select ', at, ' as at, p.device_id, p.user_id, count(*) as n from ', source, ' group by 1, 2, 3']),
      ),
      ...(plan
        ? [
            joinSql([
              'select p.quarter as at, p.device_id, p.user_id, sum(p.positions) as n from ',
              plan.rollupSource('rollup_runs', conditions),
              ' group by 1, 2, 3',
            ]),
          ]
        : []),
    ];
    return execute<{ bucket: string; visitors: number; devices: number; positions: number }>(
      joinSql([
        `select to_char(bucket, '${format}') as bucket, count(distinct visitor)::int as visitors, count(distinct device_id)::int as devices, sum(n)::int as positions
         from (
           select `,
        quarters ? localBucket('q.at') : 'q.at',
        ` as bucket, q.device_id, coalesce(q.user_id::text, 'device:' || q.device_id) as visitor, sum(q.n) as n
           from (`,
        joinSql(groups, ' union all '),
        `) q group by 1, 2, 3
         ) v group by v.bucket order by v.bucket`,
      ]),
    );
  });
  return {
    meta: REPORT_COLUMNS.visitors,
    rows: rows.map((r) => [r.bucket, r.visitors, r.devices, r.positions]),
    rowsRead: rows.reduce((sum, r) => sum + r.positions, 0),
  };
};

/**
 * Time devices spent in the building: sessions (gaps over `session_threshold` split them), each device's total
 * per group, then min / average / percentiles / max of those totals. Sessions come from one parallel
 * aggregation per device and window (SessionWindows); the statistics then run in SQL over them, as before.
 * With rollups (a threshold of at least RUN_GAP_US), whole quarters come as the rollups' runs, the window's
 * edges and pending device-hours as sessions from positions, and the two are joined per device (joinRuns).
 */
const positioningTime: Query = async (storage, params, scope, limits = UNBOUNDED, options = {}) => {
  const filter = rowFilter(scope, params);
  filter.add('p.building_id = ?', params.building_id);
  if (params.floor_id) filter.add('p.floor_id = ?', params.floor_id);
  const conditions = filter.sql();
  const rows = await inReportTransaction(storage, limits, async (execute) => {
    const origin = await originOf(
      execute,
      params,
      joinSql([conditions, sqlOf(' and p.ts >= ? and p.ts < ?', params.from_date, params.to_date)]),
    );
    const timing = new SessionWindows(params.session_threshold, origin, (Date.parse(params.to_date) - Date.parse(origin)) * 1000);
    const plan = timing.thresholdUs >= RUN_GAP_US ? await rollupPlan(execute, scope, params, QUARTER_MS, options) : null;
    const windows = new Map<string, Window>();
    for (const source of plan ? plan.rawSources(conditions) : [windowPositions(conditions, params)]) {
      for (const row of await execute<WindowRow>(
        joinSql(['select p.device_id, ', timing.aggregates, ' from ', source, ' group by p.device_id, ', timing.window]),
      )) {
        addWindow(windows, timing, row.device_id, row);
      }
    }
    const where = plan
      ? plan.rawWhere(conditions)
      : joinSql([conditions, sqlOf(' and p.ts >= ? and p.ts < ?', params.from_date, params.to_date)]);
    const byDevice: Map<string, Run[]> = await timing.sessions(windows.values(), async (wanted) => {
      const exact = new Map<string, Position[]>();
      // biome-ignore lint/suspicious/noExplicitAny: report rows hold the columns named by the report's column list (report-columns.ts)
      for (const row of await execute<Record<string, any>>(timing.reread(sqlOf('p.device_id'), where, wanted))) {
        const t = Number(row.t);
        pushTo(exact, `${row.device_id}\u0000${Math.floor(t / timing.windowUs)}`, { t, user: null });
      }
      return exact;
    });
    if (plan) {
      const originUs = Date.parse(origin) * 1000;
      const runs = new Map<string, Run[]>();
      // Runs joined per device in PostgreSQL first, by joinRuns' rule (a run joins when it starts within the
      // threshold of the latest fix before it): a month is hundreds of thousands of runs, its sessions a few thousand.
      // Both levels order runs the same total way (a run is one per key and first fix), so ties split alike.
      for (const row of await execute<{ device_id: string; first_us: string; last_us: string; positions: number }>(
        joinSql([
          sqlOf(
            `select device_id, min(first_us) as first_us, max(last_us) as last_us, sum(positions)::int as positions
           from (
             select *, sum(starts) over (partition by device_id order by first_us, last_us, building_id, floor_id, user_id rows unbounded preceding) as session
             from (
               select p.device_id, p.first_us, p.last_us, p.positions, p.building_id, p.floor_id, p.user_id,
                      case when p.first_us - max(p.last_us) over (partition by p.device_id order by p.first_us, p.last_us, p.building_id, p.floor_id, p.user_id rows between unbounded preceding and 1 preceding) <= ?::int8 then 0 else 1 end as starts
               from `,
            timing.thresholdUs,
          ),
          plan.rollupSource('rollup_runs', conditions),
          `) r
           ) s group by device_id, session`,
        ]),
      )) {
        pushTo(runs, row.device_id, { first: Number(row.first_us) - originUs, last: Number(row.last_us) - originUs, n: row.positions });
      }
      for (const [device, list] of runs) byDevice.set(device, joinRuns([...(byDevice.get(device) ?? []), ...list], timing.thresholdUs));
    }
    const sessions = [...byDevice].flatMap(([device, runs]) => runs.map((run) => ({ device, ...run })));
    // biome-ignore lint/suspicious/noExplicitAny: report rows hold the columns named by the report's column list (report-columns.ts)
    return execute<Record<string, any>>(
      sqlOf(
        `with sessions as (
           select s.device_id, ?::timestamptz + s.first_us * interval '1 microsecond' as started, s.duration_us / 1000000.0 as seconds, s.positions
           from unnest(?::text[], ?::int8[], ?::int8[], ?::int8[]) as s(device_id, first_us, duration_us, positions)
         ),
         per_device as (
           select ${bucketSql(params.group, 'started')} as bucket, device_id, sum(seconds) as seconds, count(*) as sessions, sum(positions) as positions
           from sessions group by 1, 2
         )
         select bucket, count(*)::int as devices,
                -- People, for a pseudonymous report's minimum group size: a device's person is its user now, else itself.
                (select count(distinct coalesce(d.user_id::text, 'device:' || pd.device_id))::int from per_device pd
                  left join devices d on d.organization_id = ?::uuid and d.identifier = pd.device_id where pd.bucket = per_device.bucket) as people,
                sum(sessions)::int as sessions, sum(seconds)::float8 as total_s,
                min(seconds)::float8 as min_s, avg(seconds)::float8 as avg_s,
                percentile_cont(0.5) within group (order by seconds)::float8 as p50_s,
                percentile_cont(0.9) within group (order by seconds)::float8 as p90_s,
                max(seconds)::float8 as max_s, sum(positions)::int as positions
         from per_device group by bucket order by ${params.group === 'day_of_week' ? 'bucket::int' : 'bucket'}`,
        origin,
        pgArray(sessions.map((s) => s.device)),
        pgArray(sessions.map((s) => s.first)),
        pgArray(sessions.map((s) => s.last - s.first)),
        pgArray(sessions.map((s) => s.n)),
        params.time_zone,
        scope.organizationId,
      ),
    );
  });
  const groupLabel = (bucket: string) => (params.group === 'day_of_week' ? DAY_NAMES[Number(bucket)]! : bucket);
  return {
    meta: REPORT_COLUMNS.positioning_time,
    rows: rows.map((r) => [groupLabel(r.bucket), r.devices, r.sessions, r.total_s, r.min_s, r.avg_s, r.p50_s, r.p90_s, r.max_s]),
    rowsRead: rows.reduce((sum, r) => sum + r.positions, 0),
    people: rows.map((r) => r.people),
  };
};

/**
 * Heatmap of a floor: geohash cells of precision 10 (25 latitude and 25 longitude bits, grouped by PostgreSQL
 * as integer cells, then named here), the weight being the number of distinct users (or devices) seen there.
 * Whole hours come from the rollups' heat cells, the window's edges and pending device-hours from positions.
 */
const heatmap: Query = async (storage, params, scope, limits = UNBOUNDED, options = {}) => {
  const filter = rowFilter(scope, params);
  filter.add('p.building_id = ?', params.building_id);
  if (params.position_type === 'outdoor') filter.add('not p.indoor');
  else if (params.position_type === 'indoor') filter.add('p.indoor and p.floor_id = ?', params.floor_id);
  else filter.add('(p.floor_id = ? or not p.indoor)', params.floor_id);
  if (params.device_id) filter.add('p.device_id = ?', params.device_id);
  if (params.user_id) filter.add('p.user_id = ?', params.user_id);
  const conditions = filter.sql();
  // Two levels, as for visitors: per cell and visitor first (a hash aggregate), then per cell. A cell is the
  // geohash-10 grid cell (latCell, lngCell): its centre names it.
  const cells = await inReportTransaction(storage, limits, async (execute) => {
    const plan = await rollupPlan(execute, scope, params, HOUR_MS, options);
    const groups = [
      ...(plan ? plan.rawSources(conditions) : [windowPositions(conditions, params)]).map((source) =>
        joinSql([
          `select ${latCell('p.lat')} as lat_cell, ${lngCell('p.lng')} as lng_cell, p.user_id, p.device_id, count(*) as n from `,
          source,
          ' group by 1, 2, 3, 4',
        ]),
      ),
      ...(plan
        ? [
            joinSql([
              'select p.lat_cell::bigint, p.lng_cell::bigint, p.user_id, p.device_id, sum(p.positions) as n from ',
              plan.rollupSource('rollup_heat_cells', conditions),
              ' group by 1, 2, 3, 4',
            ]),
          ]
        : []),
    ];
    return execute<{ lat_cell: string; lng_cell: string; weight: number; positions: number }>(
      joinSql([
        `select lat_cell, lng_cell, count(distinct coalesce(user_id::text, 'device:' || device_id))::int as weight, sum(n)::int as positions
         from (`,
        joinSql(groups, ' union all '),
        ') c group by 1, 2 order by 1, 2',
      ]),
    );
  });
  const rows = cells.map((cell) => {
    const hash = encodeGeohash(
      ((Number(cell.lat_cell) + 0.5) / GEOHASH10_ROWS) * 180 - 90,
      ((Number(cell.lng_cell) + 0.5) / GEOHASH10_ROWS) * 360 - 180,
      10,
    );
    const center = decodeGeohashCenter(hash);
    return [hash, center.lat, center.lng, cell.weight, cell.positions];
  });
  return {
    meta: REPORT_COLUMNS.heatmap,
    rows,
    rowsRead: cells.reduce((sum, c) => sum + c.positions, 0),
  };
};

const RAW_ORDER: Record<string, string> = {
  timestamp: 'p.ts',
  device_id: 'p.device_id',
  user_id: 'p.user_id',
  building_id: 'p.building_id',
  floor_id: 'p.floor_id',
};

const rawData: Query = async (storage, params, scope, limits = UNBOUNDED) => {
  checkOrganization(params, scope);
  const filter = baseFilter(scope, params);
  // One building, the usual case, as a plain `=`: the (organization, building, ts) index then yields positions
  // in time order, and the first `limit` of a day are read instead of sorting the day (`= any` hides that order).
  if (params.building_ids?.length === 1) filter.add('p.building_id = ?', params.building_ids[0]);
  else if (params.building_ids) filter.add('p.building_id = any(?::int[])', pgArray(params.building_ids));
  if (params.floor_ids) filter.add('p.floor_id = any(?::int[])', pgArray(params.floor_ids));
  if (params.device_ids) filter.add('p.device_id = any(?::text[])', pgArray(params.device_ids));
  if (params.user_ids) filter.add('p.user_id::text = any(?::text[])', pgArray(params.user_ids));
  if (params.position_type) filter.add(params.position_type === 'indoor' ? 'p.indoor' : 'not p.indoor');
  const direction = params.order_direction === 'desc' ? 'desc' : 'asc';
  const order = ((params.order_by as string[] | undefined) ?? ['timestamp']).map((field) => `${RAW_ORDER[field]} ${direction}`).join(', ');
  // The instants as µs after from_date (integers, cheap to read) rather than timestamps parsed into Dates.
  const rows = await inBoundedTransaction(storage, limits, (execute) =>
    // biome-ignore lint/suspicious/noExplicitAny: report rows hold the columns named by the report's column list (report-columns.ts)
    execute<Record<string, any>>(
      sqlOf(
        `select (extract(epoch from p.ts - ?::timestamptz) * 1000000)::int8 as t, p.device_id, p.user_id::text as user_id, p.building_id, p.floor_id, p.indoor, p.x, p.y, p.lat, p.lng, p.yaw, p.accuracy
         from positions p where ${filter.where.join(' and ')} order by ${order}, p.ts, p.device_id limit ?`,
        params.from_date,
        ...filter.values,
        params.limit,
      ),
    ),
  );
  const fromMs = Date.parse(params.from_date);
  const instant = instantFormatter(params.time_zone);
  return {
    meta: REPORT_COLUMNS.raw_data,
    rows: rows.map((r) => [
      instant(epochSecond(fromMs, Number(r.t))),
      r.device_id,
      r.user_id,
      r.building_id,
      r.floor_id,
      r.indoor,
      r.x,
      r.y,
      r.lat,
      r.lng,
      r.yaw,
      r.accuracy,
    ]),
    rowsRead: rows.length,
  };
};

/**
 * A trajectory: positions in order, `session_mark` numbering each device's sessions (a gap over the threshold
 * starts a new one). The answer is the first 100,000 positions by time, and a position's mark depends only on
 * its device's earlier positions, which are all in that prefix: so PostgreSQL reads the prefix in index order
 * (no sort of the whole range) and the marks are counted here in one pass over it, in the order it arrives
 * (sorting it by device for window functions and back by time cost more than reading it).
 */
const userPositions: Query = async (storage, params, scope, limits = UNBOUNDED) => {
  const filter = baseFilter(scope, params);
  if (params.building_id) filter.add('p.building_id = ?', params.building_id);
  if (params.user_id) filter.add('p.user_id = ?', params.user_id);
  if (params.device_id) filter.add('p.device_id = ?', params.device_id);
  const rows = await inBoundedTransaction(storage, limits, (execute) =>
    // biome-ignore lint/suspicious/noExplicitAny: report rows hold the columns named by the report's column list (report-columns.ts)
    execute<Record<string, any>>(
      sqlOf(
        `select (extract(epoch from p.ts - ?::timestamptz) * 1000000)::int8 as t, p.device_id, p.user_id::text as user_id, p.floor_id, p.lat, p.lng
         from positions p where ${filter.where.join(' and ')} order by p.ts, p.device_id limit 100000`,
        params.from_date,
        ...filter.values,
      ),
    ),
  );
  const thresholdUs = intervalMicros(params.session_threshold);
  const devices = new Map<string, { last: number; mark: number }>();
  const fromMs = Date.parse(params.from_date);
  const instant = instantFormatter(params.time_zone);
  return {
    meta: REPORT_COLUMNS.user_positions,
    rows: rows.map((r) => {
      const t = Number(r.t);
      let device = devices.get(r.device_id);
      if (!device) devices.set(r.device_id, (device = { last: t, mark: 1 }));
      else if (t - device.last > thresholdUs) device.mark += 1;
      device.last = t;
      return [instant(epochSecond(fromMs, t)), device.mark, r.floor_id, r.user_id, r.device_id, r.lat, r.lng];
    }),
    rowsRead: rows.length,
  };
};

export const reportQueries: Record<ReportName, Query> = {
  geofencing_stay_time: geofencingStayTime,
  geofencing_sessions_matches: geofencingSessionsMatches,
  visitors,
  positioning_time: positioningTime,
  heatmap,
  raw_data: rawData,
  user_positions: userPositions,
};
