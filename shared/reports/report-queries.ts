import { IsolationLevel } from '@mikro-orm/core';
import { DEFAULT_CAPTURE_RADIUS_M } from '../detection/zone-index.js';
import { ValidationError } from '../errors.js';
import { decodeGeohashCenter, encodeGeohash } from '../geo/geohash.js';
import { distanceToSegment, pointInPolygon } from '../geo/geometry.js';
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
  return localFormat(timeZone).format(date);
}

/** One formatter per time zone: building an Intl.DateTimeFormat costs far more than formatting with it. */
const localFormats = new Map<string, Intl.DateTimeFormat>();
function localFormat(timeZone: string): Intl.DateTimeFormat {
  let format = localFormats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('sv-SE', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
    localFormats.set(timeZone, format);
  }
  return format;
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

/** SQL text and its `?` parameters, kept together so that fragments compose in order. */
interface Sql {
  text: string;
  params: unknown[];
}
const sqlOf = (text: string, ...params: unknown[]): Sql => ({ text, params });
function joinSql(parts: (Sql | string)[], separator = ''): Sql {
  const list = parts.map((part) => (typeof part === 'string' ? sqlOf(part) : part));
  return { text: list.map((part) => part.text).join(separator), params: list.flatMap((part) => part.params) };
}

type Execute = <T = Record<string, any>>(query: Sql) => Promise<T[]>;

/**
 * Runs a report's statements in one REPEATABLE READ transaction (they see the same positions) with two
 * settings of its own. `parallel_tuple_cost`: the reports group a day of positions into a few thousand
 * (device, window) groups, but the planner, blind to how many positions share a window, expects a tenth of
 * the rows and would rather run on one process than gather that many from workers (twice as slow on two
 * cores). `jit_inline_above_cost`: inlining PostgreSQL's functions into the compiled expressions costs each
 * process about 0.1 s and gains less than that here (optimisation, which does pay, stays on).
 */
async function inReportTransaction<T>(storage: Storage, run: (execute: Execute) => Promise<T>): Promise<T> {
  return storage.em().transactional(
    async (em) => {
      const execute: Execute = async (query) => (await em.execute(query.text, query.params)) as never;
      await execute(sqlOf('set local parallel_tuple_cost = 0.01'));
      await execute(sqlOf('set local jit_inline_above_cost = -1'));
      return run(execute);
    },
    { isolationLevel: IsolationLevel.REPEATABLE_READ },
  );
}

/** A session threshold in µs, rounded as `make_interval(secs => ...)` rounds it (rint: halves to even). */
function intervalMicros(seconds: number): number {
  const us = seconds * 1e6;
  return Math.abs(us % 1) === 0.5 ? 2 * Math.round(us / 2) : Math.round(us);
}

/** Time in µs as JS numbers; they stay exact below 2^53 µs (285 years). */
const MAX_SPAN_US = Number.MAX_SAFE_INTEGER;

/**
 * Sessions without sorting positions. A session (of a device, or of a device in a geofence: a "key") is a
 * maximal run of its positions with consecutive gaps of at most the threshold. Sorting every position for
 * window functions runs in one process and spills; instead one parallel aggregation groups positions per key
 * and time window, each window recording its first and last position, a count, and which of its 64 slots hold
 * a position (`bit_or`). A slot spans half the threshold, so positions in the same or adjacent slots are
 * never more than the threshold apart: a window whose occupied slots are all adjacent is one piece of a
 * session, and consecutive windows join when the gap from one's last position to the next one's first is
 * within the threshold. Only a window with a hole (a device that left and came back within the window) is
 * read again, position by position. Times are µs after `origin`.
 */
class SessionWindows {
  /** The threshold in µs, rounded as make_interval rounds it, capped at the report's span (the same splits). */
  readonly thresholdUs: number;
  readonly slotUs: number;
  readonly windowUs: number;
  /** Empty slots a gap may span and still be within the threshold (-1: not even adjacent slots are). */
  private readonly maxEmpty: number;

  constructor(
    thresholdSeconds: number,
    readonly origin: string,
    spanUs: number,
  ) {
    this.thresholdUs = Math.min(intervalMicros(thresholdSeconds), spanUs);
    // Positions in slots d apart are at most (d + 1) slots - 1 µs apart: adjacent ones fit when 2 slots - 1 µs <= threshold.
    this.slotUs = Math.max(1, Math.floor((this.thresholdUs + 1) / 2));
    this.windowUs = 64 * this.slotUs;
    this.maxEmpty = Math.floor((this.thresholdUs + 1) / this.slotUs) - 2;
  }

  /** The window of position `p` (a grouping key). */
  get window(): Sql {
    return sqlOf('date_bin(make_interval(secs => ?), p.ts, ?::timestamptz)', this.windowUs / 1e6, this.origin);
  }

  /** µs from `origin` to `column` (exact: numeric; for a window's first and last, or re-read positions). */
  offset(column: string): Sql {
    return sqlOf(`(extract(epoch from ${column} - ?::timestamptz) * 1000000)::int8`, this.origin);
  }

  /** A window's aggregates. Slots are counted from the window's start, where float µs are exact. */
  get aggregates(): Sql {
    const slot = joinSql(["((date_part('epoch', p.ts - ", this.window, sqlOf(') * 1000000::float8)::int8 / ?)::int', this.slotUs)]);
    return joinSql(['bit_or(1::int8 << ', slot, ')::text as bits, ', this.offset('min(p.ts)'), ' as first_us, ', this.offset('max(p.ts)'), ' as last_us, count(*)::int as n']);
  }

  /** Reads positions again in some windows: `select` (columns of `p`), joined to the (device, window) pairs, `where`, by time. */
  reread(select: Sql, where: Sql, wanted: { device: string; index: number }[]): Sql {
    return joinSql([
      'select ',
      select,
      ', ',
      this.offset('p.ts'),
      sqlOf(' as t from unnest(?::text[], ?::int8[]) as w(device_id, start_us)', pgArray(wanted.map((w) => w.device)), pgArray(wanted.map((w) => w.index * this.windowUs))),
      sqlOf(" join positions p on p.device_id = w.device_id and p.ts >= ?::timestamptz + w.start_us * interval '1 microsecond'", this.origin),
      sqlOf(" and p.ts < ?::timestamptz + (w.start_us + ?) * interval '1 microsecond' where ", this.origin, this.windowUs),
      where,
      ' order by p.ts',
    ]);
  }

  /** Whether no gap inside a window can exceed the threshold: bridging gaps of up to `maxEmpty` empty slots leaves one run. */
  private isWhole(bits: bigint): boolean {
    if (this.maxEmpty < 0 || bits === 0n) return (bits & (bits - 1n)) === 0n;
    let run = bits;
    for (let shift = 1; shift <= this.maxEmpty; shift++) run |= bits >> BigInt(shift);
    run /= run & -run; // drop the empty slots below the first occupied one
    return (run & (run + 1n)) === 0n;
  }

  /**
   * Sessions per key. `windows` are level one's, merged per key and window; `reread` answers the positions of
   * the holed ones (by device and window index), keyed `key \0 window index`, in time order.
   */
  async sessions(windows: Iterable<Window>, reread: (wanted: { device: string; index: number }[]) => Promise<Map<string, Position[]>>): Promise<Map<string, Run[]>> {
    const byKey = new Map<string, Window[]>();
    const holed = new Map<string, { device: string; index: number }>();
    for (const window of windows) {
      pushTo(byKey, window.key, window);
      window.whole = this.isWhole(window.bits);
      if (!window.whole) holed.set(`${window.device}\u0000${window.index}`, { device: window.device, index: window.index });
    }
    const exact = holed.size > 0 ? await reread([...holed.values()]) : new Map<string, Position[]>();
    const sessions = new Map<string, Run[]>();
    for (const [key, list] of byKey) {
      list.sort((a, b) => a.index - b.index);
      const runs = list.flatMap((window) => (window.whole ? [window] : this.runsOf(exact.get(`${key}\u0000${window.index}`) ?? [])));
      sessions.set(key, this.join(runs));
    }
    return sessions;
  }

  /** Exact runs of time-ordered positions. */
  private runsOf(positions: Position[]): Run[] {
    return this.join(positions.map(({ t, user }) => ({ first: t, last: t, n: 1, user })));
  }

  /** Joins time-ordered runs wherever the gap between them is within the threshold. */
  private join(runs: Run[]): Run[] {
    const joined: Run[] = [];
    for (const run of runs) {
      const last = joined[joined.length - 1];
      if (last && run.first - last.last <= this.thresholdUs) {
        last.last = Math.max(last.last, run.last);
        last.n += run.n;
        last.user = maxUser(last.user, run.user);
      } else joined.push({ first: run.first, last: run.last, n: run.n, user: run.user });
    }
    return joined;
  }
}

/**
 * The origin of a report's offsets: its start, unless the report spans more than JS numbers hold exactly in
 * µs; then its first position (an extra scan, for windows of centuries only).
 */
async function originOf(execute: Execute, params: Params, where: Sql): Promise<string> {
  const from = params.from_date as string;
  if ((Date.parse(params.to_date) - Date.parse(from)) * 1000 < MAX_SPAN_US) return from;
  const [row] = await execute<{ first_ms: string | null }>(joinSql(['select floor(extract(epoch from min(p.ts)) * 1000)::int8 as first_ms from positions p where ', where]));
  return row?.first_ms ? new Date(Number(row.first_ms)).toISOString() : from;
}

interface Position {
  t: number;
  user: string | null;
}

/** Positions from `first` to `last` (µs after the origin), how many, and the greatest user id (as max(user_id::text)). */
interface Run {
  first: number;
  last: number;
  n: number;
  user: string | null;
}
const maxUser = (a: string | null, b: string | null) => (a === null ? b : b === null || a >= b ? a : b);

function pushTo<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** One window of one key (level one's rows of several users of a key and window merge into it). */
interface Window extends Run {
  device: string;
  key: string;
  index: number;
  bits: bigint;
  whole?: boolean;
}

/** A row of level one: occupied slots (int8 as text), first and last position (µs after the origin), count. */
interface WindowRow {
  device_id: string;
  user_id?: string | null;
  bits: string;
  first_us: string;
  last_us: string;
  n: number;
  [column: string]: unknown;
}

function addWindow(windows: Map<string, Window>, timing: SessionWindows, key: string, row: WindowRow): void {
  const first = Number(row.first_us);
  const index = Math.floor(first / timing.windowUs);
  const id = `${key}\u0000${index}`;
  const bits = BigInt.asUintN(64, BigInt(row.bits));
  const last = Number(row.last_us);
  const user = row.user_id ?? null;
  const window = windows.get(id);
  if (!window) windows.set(id, { device: row.device_id, key, index, bits, first, last, n: row.n, user });
  else {
    window.bits |= bits;
    window.first = Math.min(window.first, first);
    window.last = Math.max(window.last, last);
    window.n += row.n;
    window.user = maxUser(window.user, user);
  }
}

/** A geofence's current geometry, one shape per geofence: polygon, disc (circle, or point with capture radius) or path (line with capture radius). */
interface FenceShape {
  fenceId: string;
  floorId: number;
  kind: 'polygon' | 'disc' | 'path';
  points: [number, number][];
  /** The polygon or path literal PostgreSQL tests against. */
  literal: string;
  radius: number;
}

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
    `select id, name, floor_id, type, cartesians, radius from geofences where ${where.join(' and ')} order by id`,
    values,
  );
  const shapes: FenceShape[] = [];
  const names = new Map<string, string>();
  const pt = ([x, y]: [number, number]) => `(${x},${y})`;
  for (const fence of fences) {
    names.set(fence.id, fence.name);
    const points = typeof fence.cartesians === 'string' ? (JSON.parse(fence.cartesians) as [number, number][]) : fence.cartesians;
    const radius = fence.radius ?? DEFAULT_CAPTURE_RADIUS_M;
    const shape = { fenceId: fence.id, floorId: fence.floor_id, points };
    if (points.length === 0) continue;
    if (fence.type === 'POLYGON') shapes.push({ ...shape, kind: 'polygon', literal: `(${points.map(pt).join(',')})`, radius: 0 });
    else if (fence.type === 'CIRCLE' || fence.type === 'POINT') shapes.push({ ...shape, points: [points[0]!], kind: 'disc', literal: '', radius });
    // A line tests the distance to its nearest segment (`point <-> path`); one point makes no segment, as before.
    else if (points.length >= 2) shapes.push({ ...shape, kind: 'path', literal: `[${points.map(pt).join(',')}]`, radius });
  }
  return { shapes, names };
}

const SHAPE_KINDS = ['polygon', 'disc', 'path'] as const;

type Rect = [number, number, number, number];
/** Cells are classified with this margin (m) around them, far above float error and PostgreSQL's 1e-6 fuzz. */
const CELL_MARGIN = 1e-3;
/** Upper bound on grid cells per report (one int[] parameter per floor and layer holds them). */
const MAX_CELLS = 200_000;

function shapeBox(shape: FenceShape): Rect {
  const xs = shape.points.map((p) => p[0]);
  const ys = shape.points.map((p) => p[1]);
  return [Math.min(...xs) - shape.radius, Math.min(...ys) - shape.radius, Math.max(...xs) + shape.radius, Math.max(...ys) + shape.radius];
}

/** Whether the segment a-b meets the closed rectangle (Liang-Barsky clipping). */
function segmentMeetsRect([ax, ay]: [number, number], [bx, by]: [number, number], [x0, y0, x1, y1]: Rect): boolean {
  let t0 = 0;
  let t1 = 1;
  const dx = bx - ax;
  const dy = by - ay;
  for (const [p, q] of [[-dx, ax - x0], [dx, x1 - ax], [-dy, ay - y0], [dy, y1 - ay]] as const) {
    if (p === 0) {
      if (q < 0) return false;
    } else {
      const t = q / p;
      if (p < 0) t0 = Math.max(t0, t);
      else t1 = Math.min(t1, t);
      if (t0 > t1) return false;
    }
  }
  return true;
}

/** Whether every point of the rectangle is inside the shape (then PostgreSQL's test would say so too). */
function rectInside(shape: FenceShape, rect: Rect): boolean {
  const corners: [number, number][] = [[rect[0], rect[1]], [rect[2], rect[1]], [rect[2], rect[3]], [rect[0], rect[3]]];
  const { points, radius } = shape;
  if (shape.kind === 'disc') return corners.every(([x, y]) => Math.hypot(x - points[0]![0], y - points[0]![1]) < radius);
  if (shape.kind === 'path') return points.slice(1).some((b, i) => corners.every((corner) => distanceToSegment(corner, points[i]!, b) < radius));
  // Polygon: the corners inside and no edge entering the rectangle.
  // Boundary-inclusive here, but a corner on the boundary has an edge through it, which the next check refuses.
  if (!corners.every((corner) => pointInPolygon(corner, points))) return false;
  return !points.some((a, i) => segmentMeetsRect(a, points[(i + 1) % points.length]!, rect));
}

/**
 * Geofence containment without joining every position to every geofence (the bounding-box join checked
 * positions x geofences pairs): a grid over each floor's geofences, stored as 2-D int arrays indexed by
 * `(x / cell)::int`, `(y / cell)::int` (rounded: cell i spans (i - 1/2, i + 1/2) cells). A cell lists the
 * shapes that can contain its points: +n when all of it is inside shape n (no test needed), -n when shape n
 * crosses it (PostgreSQL's own test decides, as before). Cells reached by several shapes hold them in
 * successive layers (arrays). An array lookup per position is far cheaper than a hash join to cells, which
 * alone took as long as the scan on a day of positions.
 */
class FenceGrid {
  /** Shapes numbered from 1: by floor, then by kind (polygons, discs, paths), as `exact` expects. */
  readonly shapes: FenceShape[];
  readonly layers: number;
  private readonly floors: { floorId: number; base: number; shapes: FenceShape[]; x0: number; y0: number; x1: number; y1: number; cells: number[][][] }[] = [];

  private constructor(
    shapes: FenceShape[],
    readonly cell: number,
  ) {
    const floorIds = [...new Set(shapes.map((shape) => shape.floorId))];
    this.shapes = floorIds.flatMap((floorId) => SHAPE_KINDS.flatMap((kind) => shapes.filter((shape) => shape.floorId === floorId && shape.kind === kind)));
    const perFloor = floorIds.map((floorId) => {
      const cells = new Map<string, { x: number; y: number; entries: number[] }>();
      this.shapes.forEach((shape, index) => {
        if (shape.floorId !== floorId) return;
        const box = shapeBox(shape);
        for (let x = Math.round(box[0] / cell) - 1; x <= Math.round(box[2] / cell) + 1; x++) {
          for (let y = Math.round(box[1] / cell) - 1; y <= Math.round(box[3] / cell) + 1; y++) {
            const rect: Rect = [(x - 0.5) * cell - CELL_MARGIN, (y - 0.5) * cell - CELL_MARGIN, (x + 0.5) * cell + CELL_MARGIN, (y + 0.5) * cell + CELL_MARGIN];
            if (rect[2] < box[0] || rect[0] > box[2] || rect[3] < box[1] || rect[1] > box[3]) continue;
            const entry = cells.get(`${x},${y}`) ?? { x, y, entries: [] };
            entry.entries.push(rectInside(shape, rect) ? index + 1 : -(index + 1));
            cells.set(`${x},${y}`, entry);
          }
        }
      });
      return { floorId, entries: [...cells.values()] };
    });
    this.layers = Math.max(1, ...perFloor.flatMap(({ entries }) => entries.map((entry) => entry.entries.length)));
    for (const { floorId, entries } of perFloor) {
      const x0 = Math.min(...entries.map((e) => e.x));
      const y0 = Math.min(...entries.map((e) => e.y));
      const x1 = Math.max(...entries.map((e) => e.x));
      const y1 = Math.max(...entries.map((e) => e.y));
      const cells = Array.from({ length: this.layers }, () => Array.from({ length: x1 - x0 + 1 }, () => new Array<number>(y1 - y0 + 1).fill(0)));
      for (const entry of entries) entry.entries.forEach((value, layer) => (cells[layer]![entry.x - x0]![entry.y - y0] = value));
      const base = this.shapes.findIndex((shape) => shape.floorId === floorId);
      this.floors.push({ floorId, base, shapes: this.shapes.filter((shape) => shape.floorId === floorId), x0, y0, x1, y1, cells });
    }
  }

  /** The finest cell size (from 0.5 m, doubling) that keeps the grid under MAX_CELLS. */
  static for(shapes: FenceShape[]): FenceGrid {
    const extents = new Map<number, Rect>();
    for (const shape of shapes) {
      const [x0, y0, x1, y1] = shapeBox(shape);
      const extent = extents.get(shape.floorId);
      extents.set(shape.floorId, extent ? [Math.min(extent[0], x0), Math.min(extent[1], y0), Math.max(extent[2], x1), Math.max(extent[3], y1)] : [x0, y0, x1, y1]);
    }
    const count = (boxes: Rect[], size: number) => boxes.reduce((sum, [x0, y0, x1, y1]) => sum + (Math.round(x1 / size) - Math.round(x0 / size) + 3) * (Math.round(y1 / size) - Math.round(y0 / size) + 3), 0);
    // The arrays span each floor's shapes, in as many layers as shapes overlap.
    const cells = (size: number) => Math.max(count([...extents.values()], size), count(shapes.map(shapeBox), size));
    let cell = 0.5;
    while (cells(cell) > MAX_CELLS) cell *= 2;
    let grid = new FenceGrid(shapes, cell);
    while (grid.size > 2 * MAX_CELLS) grid = new FenceGrid(shapes, (cell *= 2));
    return grid;
  }

  /** Entries of all the arrays. */
  get size(): number {
    return this.floors.reduce((sum, { cells }) => sum + cells.length * cells[0]!.length * cells[0]![0]!.length, 0);
  }

  get floorIds(): number[] {
    return this.floors.map((floor) => floor.floorId);
  }

  /** One expression per floor, chosen by `p.floor_id` when there are several. */
  private perFloor(build: (floor: FenceGrid['floors'][number]) => Sql): Sql {
    if (this.floors.length === 1) return build(this.floors[0]!);
    return joinSql(['(case p.floor_id', ...this.floors.map((floor) => joinSql([` when ${floor.floorId} then `, build(floor)])), ' end)']);
  }

  /**
   * The signed shape number of layer `layer` of the cell of position `p` on `floor`, NULL outside the grid.
   * `guarded` checks the bounds first (which also keeps the casts in range): the WHERE clause does, and the
   * select list, computed only for the rows it kept, need not.
   */
  private cellOf(floor: FenceGrid['floors'][number], layer: number, guarded: boolean): Sql {
    const { x0, y0, x1, y1, cells } = floor;
    const literal = `[${x0}:${x1}][${y0}:${y1}]={${cells[layer]!.map((column) => `{${column.join(',')}}`).join(',')}}`;
    const cell = sqlOf(`(?::int[])[(p.x * ${1 / this.cell})::int][(p.y * ${1 / this.cell})::int]`, literal);
    if (!guarded) return cell;
    const [minX, maxX, minY, maxY] = [(x0 - 0.5) * this.cell, (x1 + 0.5) * this.cell, (y0 - 0.5) * this.cell, (y1 + 0.5) * this.cell];
    return joinSql([`case when p.x between ${minX} and ${maxX} and p.y between ${minY} and ${maxY} then `, cell, ' end']);
  }

  /** Whether position `p` is in a cell of some shape (for the WHERE clause; false or NULL otherwise). */
  get candidate(): Sql {
    return joinSql([this.perFloor((floor) => this.cellOf(floor, 0, true)), ' <> 0']);
  }

  /**
   * PostgreSQL's containment test of position `p` in shape number `n` (an SQL expression) of `floor`. The
   * geometry comes from arrays of the floor's shapes of each kind (a polygon or path array is read from its
   * start, so arrays are kept per floor).
   */
  private exact(floor: FenceGrid['floors'][number], n: Sql): Sql {
    const branches: { last: number; test: Sql }[] = [];
    let offset = floor.base;
    for (const kind of SHAPE_KINDS) {
      const of = floor.shapes.filter((shape) => shape.kind === kind);
      if (of.length === 0) continue;
      const at = (values: (string | number)[], type: string) => joinSql([sqlOf(`(?::${type}[])[`, pgArray(values)), n, ` - ${offset}]`]);
      const radius = at(of.map((s) => s.radius), 'float8');
      const test =
        kind === 'polygon'
          ? joinSql([at(of.map((s) => s.literal), 'polygon'), ' @> point(p.x, p.y)'])
          : kind === 'disc'
            ? joinSql(['point(', at(of.map((s) => s.points[0]![0]), 'float8'), ', ', at(of.map((s) => s.points[0]![1]), 'float8'), ') <-> point(p.x, p.y) <= ', radius])
            : joinSql(['point(p.x, p.y) <-> ', at(of.map((s) => s.literal), 'path'), ' <= ', radius]);
      offset += of.length;
      branches.push({ last: offset, test });
    }
    if (branches.length === 1) return branches[0]!.test;
    return joinSql(['(case ', joinSql(branches.map(({ last, test }) => joinSql(['when ', n, ` <= ${last} then `, test])), ' '), ' end)']);
  }

  /**
   * The shape number position `p` is in on layer `layer`, or 0 (for rows the WHERE clause kept). A cell wholly
   * inside costs one lookup (`greatest` keeps its positive number and `coalesce` stops there), and so does an
   * empty layer above the first (which every kept row fills).
   */
  hit(layer: number): Sql {
    return this.perFloor((floor) => {
      const code = this.cellOf(floor, layer, false);
      const n = joinSql(['(-', code, ')']);
      const hit = joinSql(['coalesce(nullif(greatest(', code, ', 0), 0), case when ', code, ' < 0 and ', this.exact(floor, n), ' then ', n, ' end, 0)']);
      return layer === 0 ? hit : joinSql(['case ', code, ' when 0 then 0 else ', hit, ' end']);
    });
  }
}


/** A stay of a device in a geofence. */
interface FenceSession {
  device_id: string;
  user_id: string | null;
  fence_id: string;
  entered_at: Date;
  exited_at: Date;
  duration_s: number;
  positions: number;
}

/**
 * Stays of devices in geofences, from stored positions against the geofences' current geometry: the grid
 * (FenceGrid) tells which geofences each position is in, and one parallel aggregation groups positions per
 * device, geofence and window (SessionWindows); the stays are assembled here. A position counts as stored:
 * one uploaded twice counts twice, as in every other report.
 */
async function fenceSessions(storage: Storage, params: Params, scope: ReportScope) {
  checkOrganization(params, scope);
  const { shapes, names } = await fenceShapes(storage, scope, params);
  if (shapes.length === 0) return { sessions: [] as FenceSession[], names };
  const grid = FenceGrid.for(shapes);
  const filter = baseFilter(scope, params);
  // `= any(array)` costs a few % of the scan per position; one building, the usual case, is a plain `=`.
  if (params.building_ids?.length === 1) filter.add('p.building_id = ?', params.building_ids[0]);
  else if (params.building_ids) filter.add('p.building_id = any(?::int[])', pgArray(params.building_ids));
  if (params.device_ids) filter.add('p.device_id = any(?::text[])', pgArray(params.device_ids));
  if (params.user_ids) filter.add('p.user_id = any(?::uuid[])', pgArray(params.user_ids));
  if (params.only_assigned) filter.add('exists (select 1 from devices d where d.organization_id = p.organization_id and d.identifier = p.device_id and d.user_id is not null)');
  if (grid.floorIds.length === 1) filter.add('p.floor_id = ?', grid.floorIds[0]);
  else filter.add('p.floor_id = any(?::int[])', pgArray(grid.floorIds));
  // Positions in a cell of some geofence (which also rules out a null x or y).
  const where = joinSql([sqlOf(filter.where.join(' and '), ...filter.values), ' and ', grid.candidate]);
  const layers = Array.from({ length: grid.layers }, (_, layer) => layer);
  const hits = joinSql(layers.map((layer) => joinSql([grid.hit(layer), ` as k${layer}`])), ', ');
  const shapesOf = (row: Record<string, unknown>) => layers.map((layer) => Number(row[`k${layer}`])).filter((n) => n !== 0);

  return inReportTransaction(storage, async (execute) => {
    const origin = await originOf(execute, params, where);
    const originMs = Date.parse(origin);
    const timing = new SessionWindows(params.session_threshold, origin, (Date.parse(params.to_date) - originMs) * 1000);
    // Ordered by device, so that stays can be ordered as PostgreSQL orders device ids.
    const rows = await execute<WindowRow>(
      joinSql([
        'select p.device_id, p.user_id::text as user_id, ',
        hits,
        ', ',
        timing.aggregates,
        ' from positions p where ',
        where,
        ` group by p.device_id, p.user_id, ${layers.map((layer) => `k${layer}`).join(', ')}, `,
        timing.window,
        ' order by p.device_id',
      ]),
    );
    const deviceRank = new Map<string, number>();
    const windows = new Map<string, Window>();
    for (const row of rows) {
      if (!deviceRank.has(row.device_id)) deviceRank.set(row.device_id, deviceRank.size);
      for (const shape of shapesOf(row)) addWindow(windows, timing, `${row.device_id}\u0000${shape}`, row);
    }
    const byKey = await timing.sessions(windows.values(), async (wanted) => {
      const exact = new Map<string, Position[]>();
      for (const row of await execute<Record<string, any>>(timing.reread(joinSql(['p.device_id, p.user_id::text as user_id, ', hits]), where, wanted))) {
        const t = Number(row.t);
        for (const shape of shapesOf(row)) pushTo(exact, `${row.device_id}\u0000${shape}\u0000${Math.floor(t / timing.windowUs)}`, { t, user: row.user_id });
      }
      return exact;
    });
    const sessions: (FenceSession & { entered: number; rank: number })[] = [];
    for (const [key, runs] of byKey) {
      const [device, shape] = key.split('\u0000') as [string, string];
      const fenceId = grid.shapes[Number(shape) - 1]!.fenceId;
      for (const run of runs) {
        const duration = (run.last - run.first) / 1e6;
        if (params.min_stay_time !== undefined && duration < params.min_stay_time) continue;
        if (params.max_stay_time !== undefined && duration > params.max_stay_time) continue;
        sessions.push({
          device_id: device,
          user_id: run.user,
          fence_id: fenceId,
          entered_at: new Date(originMs + Math.floor(run.first / 1000)),
          exited_at: new Date(originMs + Math.floor(run.last / 1000)),
          duration_s: duration,
          positions: run.n,
          entered: run.first,
          rank: deviceRank.get(device)!,
        });
      }
    }
    // As `order by min(ts), device_id, fence_id::text` (lower-case uuid text compares the same in JS).
    sessions.sort((a, b) => a.entered - b.entered || a.rank - b.rank || (a.fence_id < b.fence_id ? -1 : a.fence_id > b.fence_id ? 1 : 0));
    return { sessions: sessions as FenceSession[], names };
  });
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

/** Since 1980 every time zone's offset from UTC is a whole number of quarter hours (checked over the IANA zones). */
const QUARTER_HOUR_OFFSETS_SINCE = Date.UTC(1980, 0, 1);

/**
 * Unique visitors (a user, or a device without one) per local month, day or hour. Positions are grouped per
 * quarter hour of UTC and visitor first (a parallel hash aggregate), and only those groups are placed in their
 * local bucket: every local hour, day and month starts on a UTC quarter hour, so no quarter straddles two
 * buckets, and the time-zone conversion runs once per quarter instead of once per position (half the time
 * of a day of 8.64M positions in Europe/Madrid). Before 1980 some zones had offsets such as -00:44:30, so
 * such windows place each position itself. A count(distinct) straight over every position would sort them all.
 */
const visitors: Query = async (storage, params, scope) => {
  const filter = baseFilter(scope, params);
  filter.add('p.building_id = ?', params.building_id);
  if (params.floor_id) filter.add('p.floor_id = ?', params.floor_id);
  const { unit, format } = TRUNCATE[params.group]!;
  const localBucket = (instant: string) => `date_trunc('${unit}', ${instant} at time zone ?::text)`;
  const quarters = Date.parse(params.from_date) >= QUARTER_HOUR_OFFSETS_SINCE;
  const rows = await storage.execute<{ bucket: string; visitors: number; devices: number; positions: number }>(
    `select to_char(bucket, '${format}') as bucket, count(distinct visitor)::int as visitors, count(distinct device_id)::int as devices, sum(n)::int as positions
     from (
       select ${quarters ? localBucket('q.at') : 'q.at'} as bucket, q.device_id, coalesce(q.user_id::text, 'device:' || q.device_id) as visitor, sum(q.n) as n
       from (
         select ${quarters ? `date_bin('15 minutes', p.ts, '2000-01-01T00:00:00Z')` : localBucket('p.ts')} as at, p.device_id, p.user_id, count(*) as n
         from positions p where ${filter.where.join(' and ')} group by 1, 2, 3
       ) q group by 1, 2, 3
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
 * per group, then min / average / percentiles / max of those totals. Sessions come from one parallel
 * aggregation per device and window (SessionWindows); the statistics then run in SQL over them, as before.
 */
const positioningTime: Query = async (storage, params, scope) => {
  const filter = baseFilter(scope, params);
  filter.add('p.building_id = ?', params.building_id);
  if (params.floor_id) filter.add('p.floor_id = ?', params.floor_id);
  const where = sqlOf(filter.where.join(' and '), ...filter.values);
  const rows = await inReportTransaction(storage, async (execute) => {
    const origin = await originOf(execute, params, where);
    const timing = new SessionWindows(params.session_threshold, origin, (Date.parse(params.to_date) - Date.parse(origin)) * 1000);
    const windows = new Map<string, Window>();
    for (const row of await execute<WindowRow>(joinSql(['select p.device_id, ', timing.aggregates, ' from positions p where ', where, ' group by p.device_id, ', timing.window]))) {
      addWindow(windows, timing, row.device_id, row);
    }
    const byDevice = await timing.sessions(windows.values(), async (wanted) => {
      const exact = new Map<string, Position[]>();
      for (const row of await execute<Record<string, any>>(timing.reread(sqlOf('p.device_id'), where, wanted))) {
        const t = Number(row.t);
        pushTo(exact, `${row.device_id}\u0000${Math.floor(t / timing.windowUs)}`, { t, user: null });
      }
      return exact;
    });
    const sessions = [...byDevice].flatMap(([device, runs]) => runs.map((run) => ({ device, ...run })));
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
         select bucket, count(*)::int as devices, sum(sessions)::int as sessions, sum(seconds)::float8 as total_s,
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
      ),
    );
  });
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
 * A trajectory: positions in order, `session_mark` numbering each device's sessions (a gap over the threshold
 * starts a new one). The answer is the first 100,000 positions by time, and a position's mark depends only on
 * its device's earlier positions, which are all in that prefix: so PostgreSQL reads the prefix in index order
 * (no sort of the whole range) and the marks are counted here in one pass over it, in the order it arrives
 * (sorting it by device for window functions and back by time cost more than reading it).
 */
const userPositions: Query = async (storage, params, scope) => {
  const filter = baseFilter(scope, params);
  if (params.building_id) filter.add('p.building_id = ?', params.building_id);
  if (params.user_id) filter.add('p.user_id = ?', params.user_id);
  if (params.device_id) filter.add('p.device_id = ?', params.device_id);
  const rows = await storage.execute<Record<string, any>>(
    `select p.ts, (extract(epoch from p.ts - ?::timestamptz) * 1000000)::int8 as t, p.device_id, p.user_id::text as user_id, p.floor_id, p.lat, p.lng
     from positions p where ${filter.where.join(' and ')} order by p.ts, p.device_id limit 100000`,
    [params.from_date, ...filter.values],
  );
  const thresholdUs = intervalMicros(params.session_threshold);
  const devices = new Map<string, { last: number; mark: number }>();
  return {
    meta: [col('timestamp', 'datetime'), col('session_mark', 'integer'), col('floor_id', 'integer', true), col('user_id', 'string', true), col('device_id', 'string'), col('lat', 'number'), col('lng', 'number')],
    rows: rows.map((r) => {
      const t = Number(r.t);
      let device = devices.get(r.device_id);
      if (!device) devices.set(r.device_id, (device = { last: t, mark: 1 }));
      else if (t - device.last > thresholdUs) device.mark += 1;
      device.last = t;
      return [formatInstant(r.ts, params.time_zone), device.mark, r.floor_id, r.user_id, r.device_id, r.lat, r.lng];
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
