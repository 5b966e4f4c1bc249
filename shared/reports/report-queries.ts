import { DEFAULT_CAPTURE_RADIUS_M } from '../detection/zone-index.js';
import { ValidationError } from '../errors.js';
import { decodeGeohashCenter, encodeGeohash } from '../geo/geohash.js';
import { pgArray } from '../storage/pg-array.js';
import type { Storage } from '../storage/storage.js';
import type { ReportColumn, ReportName, ReportScope } from './report-params.js';

export interface QueryResult {
  meta: ReportColumn[];
  rows: unknown[][];
  rowsRead: number;
}

type Params = Record<string, any>;
type Query = (storage: Storage, params: Params, scope: ReportScope) => Promise<QueryResult>;

const col = (name: string, type: ReportColumn['type'], nullable = false): ReportColumn => ({ name, type, nullable });

/**
 * Dates out: an instant in UTC (`2023-05-20T16:59:02Z`), or, for another time zone, the local wall-clock time
 * with no offset (`2023-05-20 18:59:02`), as the spec shows.
 */
export function formatInstant(value: Date | string, timeZone: string): string {
  const date = new Date(value);
  if (timeZone === 'UTC') return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
  return new Intl.DateTimeFormat('sv-SE', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }).format(date);
}

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
  if (new Date(params.to_date) <= new Date(params.from_date)) throw new ValidationError([{ field: 'to_date', message: 'must be after from_date' }]);
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

interface FenceShape {
  fenceId: string;
  floorId: number;
  kind: 'polygon' | 'circle' | 'point' | 'lseg';
  shape: string;
  radius: number;
  bbox: [number, number, number, number];
}

/** The geofences' current geometry as PostgreSQL geometric literals (a LINE becomes one segment per edge). */
async function fenceShapes(storage: Storage, scope: ReportScope, params: Params) {
  const where = ['organization_id = ?'];
  const values: unknown[] = [scope.organizationId];
  if (params.fence_ids) {
    where.push('id = any(?::uuid[])');
    values.push(pgArray(params.fence_ids));
  } else where.push('not deleted');
  if (params.building_ids) {
    where.push('building_id = any(?::int[])');
    values.push(pgArray(params.building_ids));
  }
  const fences = await storage.execute<{ id: string; name: string; floor_id: number; type: string; cartesians: [number, number][] | string; radius: number | null }>(
    `select id, name, floor_id, type, cartesians, radius from geofences where ${where.join(' and ')}`,
    values,
  );
  const shapes: FenceShape[] = [];
  const names = new Map<string, string>();
  for (const fence of fences) {
    names.set(fence.id, fence.name);
    const points = typeof fence.cartesians === 'string' ? (JSON.parse(fence.cartesians) as [number, number][]) : fence.cartesians;
    const radius = fence.radius ?? DEFAULT_CAPTURE_RADIUS_M;
    const pt = ([x, y]: [number, number]) => `(${x},${y})`;
    const box = (pts: [number, number][], pad: number): [number, number, number, number] => [
      Math.min(...pts.map((p) => p[0])) - pad,
      Math.min(...pts.map((p) => p[1])) - pad,
      Math.max(...pts.map((p) => p[0])) + pad,
      Math.max(...pts.map((p) => p[1])) + pad,
    ];
    if (points.length === 0) continue;
    if (fence.type === 'POLYGON') shapes.push({ fenceId: fence.id, floorId: fence.floor_id, kind: 'polygon', shape: `(${points.map(pt).join(',')})`, radius: 0, bbox: box(points, 0) });
    else if (fence.type === 'CIRCLE') shapes.push({ fenceId: fence.id, floorId: fence.floor_id, kind: 'circle', shape: `<${pt(points[0]!)},${radius}>`, radius, bbox: box(points, radius) });
    else if (fence.type === 'POINT') shapes.push({ fenceId: fence.id, floorId: fence.floor_id, kind: 'point', shape: pt(points[0]!), radius, bbox: box(points, radius) });
    else {
      for (let i = 1; i < points.length; i++) {
        const segment: [number, number][] = [points[i - 1]!, points[i]!];
        shapes.push({ fenceId: fence.id, floorId: fence.floor_id, kind: 'lseg', shape: `[${segment.map(pt).join(',')}]`, radius, bbox: box(segment, radius) });
      }
    }
  }
  return { shapes, names };
}

/**
 * Stays of devices in geofences, computed in the database from positions: positions inside a fence (bbox
 * prefilter, then the exact test with PostgreSQL's geometric operators), split into sessions wherever two
 * consecutive ones are more than `session_threshold` seconds apart (window functions).
 */
async function fenceSessions(storage: Storage, params: Params, scope: ReportScope) {
  checkOrganization(params, scope);
  const { shapes, names } = await fenceShapes(storage, scope, params);
  if (shapes.length === 0) return { sessions: [] as Record<string, any>[], names };
  const filter = baseFilter(scope, params);
  filter.add('p.x is not null');
  if (params.building_ids) filter.add('p.building_id = any(?::int[])', pgArray(params.building_ids));
  if (params.device_ids) filter.add('p.device_id = any(?::text[])', pgArray(params.device_ids));
  if (params.user_ids) filter.add('p.user_id = any(?::uuid[])', pgArray(params.user_ids));
  if (params.only_assigned) filter.add('exists (select 1 from devices d where d.organization_id = p.organization_id and d.identifier = p.device_id and d.user_id is not null)');
  const columns = (pick: (shape: FenceShape) => unknown) => pgArray(shapes.map(pick) as never);
  const sessions = await storage.execute<Record<string, any>>(
    `with shapes as (
       select * from unnest(?::uuid[], ?::int[], ?::text[], ?::text[], ?::float8[], ?::float8[], ?::float8[], ?::float8[], ?::float8[])
         as s(fence_id, floor_id, kind, shape, radius, min_x, min_y, max_x, max_y)
     ),
     hits as (
       select distinct p.device_id, p.user_id, s.fence_id, p.ts
       from positions p join shapes s on s.floor_id = p.floor_id
       where ${filter.where.join(' and ')}
         and p.x between s.min_x and s.max_x and p.y between s.min_y and s.max_y
         and case s.kind
               when 'polygon' then polygon(s.shape) @> point(p.x, p.y)
               when 'circle' then circle(s.shape) @> point(p.x, p.y)
               when 'point' then point(s.shape) <-> point(p.x, p.y) <= s.radius
               else point(p.x, p.y) <-> lseg(s.shape) <= s.radius
             end
     ),
     marked as (
       select *, case when lag(ts) over w is null or ts - lag(ts) over w > make_interval(secs => ?) then 1 else 0 end as starts
       from hits window w as (partition by device_id, fence_id order by ts)
     ),
     numbered as (select *, sum(starts) over (partition by device_id, fence_id order by ts) as session_no from marked)
     select device_id, max(user_id::text) as user_id, fence_id::text as fence_id, session_no, min(ts) as entered_at, max(ts) as exited_at,
            extract(epoch from max(ts) - min(ts)) as duration_s, count(*)::int as positions
     from numbered group by device_id, fence_id, session_no
     order by min(ts), device_id, fence_id`,
    [
      columns((s) => s.fenceId),
      columns((s) => s.floorId),
      columns((s) => s.kind),
      columns((s) => s.shape),
      columns((s) => s.radius),
      columns((s) => s.bbox[0]),
      columns((s) => s.bbox[1]),
      columns((s) => s.bbox[2]),
      columns((s) => s.bbox[3]),
      ...filter.values,
      params.session_threshold,
    ],
  );
  const kept = sessions.filter(
    (session) =>
      (params.min_stay_time === undefined || Number(session.duration_s) >= params.min_stay_time) &&
      (params.max_stay_time === undefined || Number(session.duration_s) <= params.max_stay_time),
  );
  return { sessions: kept, names };
}

const geofencingSessionsMatches: Query = async (storage, params, scope) => {
  const { sessions, names } = await fenceSessions(storage, params, scope);
  return {
    meta: [col('device_id', 'string'), col('user_id', 'string', true), col('geofence_id', 'string'), col('geofence_name', 'string'), col('entered_at', 'datetime'), col('exited_at', 'datetime'), col('duration_s', 'number'), col('positions', 'integer')],
    rows: sessions.map((s) => [s.device_id, s.user_id, s.fence_id, names.get(s.fence_id) ?? '', formatInstant(s.entered_at, params.time_zone), formatInstant(s.exited_at, params.time_zone), Number(s.duration_s), s.positions]),
    rowsRead: sessions.reduce((sum, s) => sum + s.positions, 0),
  };
};

/** Stay time per group (the local day or hour a stay began), device and geofence. */
const geofencingStayTime: Query = async (storage, params, scope) => {
  const { sessions, names } = await fenceSessions(storage, params, scope);
  const groups = new Map<string, { group: string; device: string; user: string | null; fence: string; sessions: number; total: number; first: Date; last: Date; positions: number }>();
  for (const s of sessions) {
    const local = formatInstant(s.entered_at, params.time_zone === 'UTC' ? 'UTC' : params.time_zone).replace('T', ' ');
    const group = params.group === 'hour' ? `${local.slice(0, 13)}:00` : local.slice(0, 10);
    const key = `${group}|${s.device_id}|${s.fence_id}`;
    const entry = groups.get(key) ?? { group, device: s.device_id, user: s.user_id, fence: s.fence_id, sessions: 0, total: 0, first: new Date(s.entered_at), last: new Date(s.exited_at), positions: 0 };
    entry.sessions += 1;
    entry.total += Number(s.duration_s);
    entry.positions += s.positions;
    if (new Date(s.entered_at) < entry.first) entry.first = new Date(s.entered_at);
    if (new Date(s.exited_at) > entry.last) entry.last = new Date(s.exited_at);
    groups.set(key, entry);
  }
  const rows = [...groups.values()].sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : a.device < b.device ? -1 : 1));
  return {
    meta: [col('group', 'string'), col('device_id', 'string'), col('user_id', 'string', true), col('geofence_id', 'string'), col('geofence_name', 'string'), col('sessions', 'integer'), col('stay_time_s', 'number'), col('first_entry', 'datetime'), col('last_exit', 'datetime')],
    rows: rows.map((r) => [r.group, r.device, r.user, r.fence, names.get(r.fence) ?? '', r.sessions, r.total, formatInstant(r.first, params.time_zone), formatInstant(r.last, params.time_zone)]),
    rowsRead: rows.reduce((sum, r) => sum + r.positions, 0),
  };
};

const TRUNCATE: Record<string, { unit: string; format: string }> = {
  month: { unit: 'month', format: 'YYYY-MM' },
  day: { unit: 'day', format: 'YYYY-MM-DD' },
  hour: { unit: 'hour', format: 'YYYY-MM-DD HH24:00' },
};

/**
 * Unique visitors (a user, or a device without one) per local month, day or hour. Two levels: hash-group the
 * positions by bucket and visitor first, then count per bucket; a count(distinct) straight over every position
 * would sort them all (about 6x slower on a day of 8.64M positions). Buckets are formatted after grouping.
 */
const visitors: Query = async (storage, params, scope) => {
  const filter = baseFilter(scope, params);
  filter.add('p.building_id = ?', params.building_id);
  if (params.floor_id) filter.add('p.floor_id = ?', params.floor_id);
  const { unit, format } = TRUNCATE[params.group]!;
  const rows = await storage.execute<{ bucket: string; visitors: number; devices: number; positions: number }>(
    `select to_char(bucket, '${format}') as bucket, count(distinct visitor)::int as visitors, count(distinct device_id)::int as devices, sum(n)::int as positions
     from (
       select date_trunc('${unit}', p.ts at time zone ?::text) as bucket, p.device_id, coalesce(p.user_id::text, 'device:' || p.device_id) as visitor, count(*) as n
       from positions p where ${filter.where.join(' and ')} group by 1, p.user_id, p.device_id
     ) v group by v.bucket order by v.bucket`,
    [params.time_zone, ...filter.values],
  );
  return {
    meta: [col('group', 'string'), col('visitors', 'integer'), col('devices', 'integer'), col('positions', 'integer')],
    rows: rows.map((r) => [r.bucket, r.visitors, r.devices, r.positions]),
    rowsRead: rows.reduce((sum, r) => sum + r.positions, 0),
  };
};

/**
 * Time devices spent in the building: sessions (gaps over `session_threshold` split them), each device's total
 * per group, then min / average / percentiles / max of those totals.
 */
const positioningTime: Query = async (storage, params, scope) => {
  const filter = baseFilter(scope, params);
  filter.add('p.building_id = ?', params.building_id);
  if (params.floor_id) filter.add('p.floor_id = ?', params.floor_id);
  const rows = await storage.execute<Record<string, any>>(
    `with ordered as (
       select p.device_id, p.ts, case when lag(p.ts) over w is null or p.ts - lag(p.ts) over w > make_interval(secs => ?) then 1 else 0 end as starts
       from positions p where ${filter.where.join(' and ')} window w as (partition by p.device_id order by p.ts)
     ),
     numbered as (select *, sum(starts) over (partition by device_id order by ts) as session_no from ordered),
     sessions as (
       select device_id, session_no, min(ts) as started, extract(epoch from max(ts) - min(ts)) as seconds, count(*) as positions
       from numbered group by device_id, session_no
     ),
     per_device as (
       select ${bucketSql(params.group, 'started')} as bucket, device_id, sum(seconds) as seconds, count(*) as sessions, sum(positions) as positions
       from sessions group by 1, 2
     )
     select bucket, count(*)::int as devices, sum(sessions)::int as sessions, sum(seconds)::float8 as total_s,
            min(seconds)::float8 as min_s, avg(seconds)::float8 as avg_s,
            percentile_cont(0.5) within group (order by seconds)::float8 as p50_s,
            percentile_cont(0.9) within group (order by seconds)::float8 as p90_s,
            max(seconds)::float8 as max_s, sum(positions)::int as positions
     from per_device group by bucket order by ${params.group === 'day_of_week' ? 'bucket::int' : 'bucket'}`,
    [params.session_threshold, ...filter.values, params.time_zone],
  );
  const groupLabel = (bucket: string) => (params.group === 'day_of_week' ? DAY_NAMES[Number(bucket)]! : bucket);
  return {
    meta: [col('group', 'string'), col('devices', 'integer'), col('sessions', 'integer'), col('total_time_s', 'number'), col('min_s', 'number'), col('avg_s', 'number'), col('p50_s', 'number'), col('p90_s', 'number'), col('max_s', 'number')],
    rows: rows.map((r) => [groupLabel(r.bucket), r.devices, r.sessions, r.total_s, r.min_s, r.avg_s, r.p50_s, r.p90_s, r.max_s]),
    rowsRead: rows.reduce((sum, r) => sum + r.positions, 0),
  };
};

/**
 * Heatmap of a floor: geohash cells of precision 10 (25 latitude and 25 longitude bits, grouped by PostgreSQL
 * as integer cells, then named here), the weight being the number of distinct users (or devices) seen there.
 */
const heatmap: Query = async (storage, params, scope) => {
  const filter = baseFilter(scope, params);
  filter.add('p.building_id = ?', params.building_id);
  if (params.position_type === 'outdoor') filter.add('not p.indoor');
  else if (params.position_type === 'indoor') filter.add('p.indoor and p.floor_id = ?', params.floor_id);
  else filter.add('(p.floor_id = ? or not p.indoor)', params.floor_id);
  if (params.device_id) filter.add('p.device_id = ?', params.device_id);
  if (params.user_id) filter.add('p.user_id = ?', params.user_id);
  // Two levels, as for visitors: per cell and visitor first (a hash aggregate), then per cell.
  const cells = await storage.execute<{ lat_cell: string; lng_cell: string; lat: number; lng: number; weight: number; positions: number }>(
    `select lat_cell, lng_cell, sum(sum_lat) / sum(n) as lat, sum(sum_lng) / sum(n) as lng,
            count(distinct coalesce(user_id::text, 'device:' || device_id))::int as weight, sum(n)::int as positions
     from (
       select floor((p.lat + 90) / 180 * 33554432)::bigint as lat_cell, floor((p.lng + 180) / 360 * 33554432)::bigint as lng_cell,
              p.user_id, p.device_id, count(*) as n, sum(p.lat) as sum_lat, sum(p.lng) as sum_lng
       from positions p where ${filter.where.join(' and ')} group by 1, 2, 3, 4
     ) c group by 1, 2 order by 1, 2`,
    filter.values,
  );
  const rows = cells.map((cell) => {
    // Any point of the cell has the cell's geohash; its centre is what the report gives.
    const hash = encodeGeohash(Number(cell.lat), Number(cell.lng), 10);
    const center = decodeGeohashCenter(hash);
    return [hash, center.lat, center.lng, cell.weight, cell.positions];
  });
  return {
    meta: [col('geohash', 'string'), col('lat', 'number'), col('lng', 'number'), col('weight', 'integer'), col('positions', 'integer')],
    rows,
    rowsRead: cells.reduce((sum, c) => sum + c.positions, 0),
  };
};

const RAW_ORDER: Record<string, string> = { timestamp: 'p.ts', device_id: 'p.device_id', user_id: 'p.user_id', building_id: 'p.building_id', floor_id: 'p.floor_id' };

const rawData: Query = async (storage, params, scope) => {
  checkOrganization(params, scope);
  const filter = baseFilter(scope, params);
  if (params.building_ids) filter.add('p.building_id = any(?::int[])', pgArray(params.building_ids));
  if (params.floor_ids) filter.add('p.floor_id = any(?::int[])', pgArray(params.floor_ids));
  if (params.device_ids) filter.add('p.device_id = any(?::text[])', pgArray(params.device_ids));
  if (params.user_ids) filter.add('p.user_id::text = any(?::text[])', pgArray(params.user_ids));
  if (params.position_type) filter.add(params.position_type === 'indoor' ? 'p.indoor' : 'not p.indoor');
  const direction = params.order_direction === 'desc' ? 'desc' : 'asc';
  const order = ((params.order_by as string[] | undefined) ?? ['timestamp']).map((field) => `${RAW_ORDER[field]} ${direction}`).join(', ');
  const rows = await storage.execute<Record<string, any>>(
    `select p.ts, p.device_id, p.user_id::text as user_id, p.building_id, p.floor_id, p.indoor, p.x, p.y, p.lat, p.lng, p.yaw, p.accuracy
     from positions p where ${filter.where.join(' and ')} order by ${order}, p.ts, p.device_id limit ?`,
    [...filter.values, params.limit],
  );
  return {
    meta: [
      col('timestamp', 'datetime'), col('device_id', 'string'), col('user_id', 'string', true), col('building_id', 'integer', true), col('floor_id', 'integer', true),
      col('indoor', 'boolean'), col('x', 'number', true), col('y', 'number', true), col('lat', 'number'), col('lng', 'number'), col('yaw', 'number'), col('accuracy', 'number', true),
    ],
    rows: rows.map((r) => [formatInstant(r.ts, params.time_zone), r.device_id, r.user_id, r.building_id, r.floor_id, r.indoor, r.x, r.y, r.lat, r.lng, r.yaw, r.accuracy]),
    rowsRead: rows.length,
  };
};

/**
 * A trajectory: positions in order, `session_mark` numbering each device's sessions (gaps over the threshold).
 * The answer is the first 100,000 positions by time, and a position's mark depends only on its device's
 * earlier positions, which are all in that prefix: so the prefix is taken first (index order, no sort of the
 * whole range) and the window runs over it alone.
 */
const userPositions: Query = async (storage, params, scope) => {
  const filter = baseFilter(scope, params);
  if (params.building_id) filter.add('p.building_id = ?', params.building_id);
  if (params.user_id) filter.add('p.user_id = ?', params.user_id);
  if (params.device_id) filter.add('p.device_id = ?', params.device_id);
  const rows = await storage.execute<Record<string, any>>(
    `with prefix as (
       select p.ts, p.device_id, p.user_id::text as user_id, p.floor_id, p.lat, p.lng
       from positions p where ${filter.where.join(' and ')} order by p.ts, p.device_id limit 100000
     ),
     ordered as (
       select *, case when lag(ts) over w is null or ts - lag(ts) over w > make_interval(secs => ?) then 1 else 0 end as starts
       from prefix window w as (partition by device_id order by ts)
     )
     select ts, device_id, user_id, floor_id, lat, lng, sum(starts) over (partition by device_id order by ts)::int as session_mark
     from ordered order by ts, device_id`,
    [...filter.values, params.session_threshold],
  );
  return {
    meta: [col('timestamp', 'datetime'), col('session_mark', 'integer'), col('floor_id', 'integer', true), col('user_id', 'string', true), col('device_id', 'string'), col('lat', 'number'), col('lng', 'number')],
    rows: rows.map((r) => [formatInstant(r.ts, params.time_zone), r.session_mark, r.floor_id, r.user_id, r.device_id, r.lat, r.lng]),
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
