import { DEFAULT_CAPTURE_RADIUS_M } from '../detection/zone-index.js';
import { distanceToSegment, pointInPolygon } from '../geo/geometry.js';
import { pgArray } from '../storage/pg-array.js';
import type { Storage } from '../storage/storage.js';
import type { ReportScope } from './report-params.js';
import { joinSql, sqlOf, type Params, type Sql } from './report-sql.js';

/** A geofence's current geometry, one shape per geofence: polygon, disc (circle, or point with capture radius) or path (line with capture radius). */
export interface FenceShape {
  fenceId: string;
  floorId: number;
  kind: 'polygon' | 'disc' | 'path';
  points: [number, number][];
  /** The polygon or path literal PostgreSQL tests against. */
  literal: string;
  radius: number;
  /** The geometry's version and when it took effect (see the geofence entity). */
  version: number;
  since: Date;
}

export async function fenceShapes(storage: Storage, scope: ReportScope, params: Params) {
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
  const fences = await storage.execute<FenceRow>(
    `select id, name, floor_id, type, cartesians, radius, geometry_version, geometry_since from geofences where ${where.join(' and ')} order by id`,
    values,
  );
  return shapesOf(fences);
}

/** A geofence row as stored (cartesians as JSON text on some drivers). */
export interface FenceRow {
  id: string;
  name: string;
  floor_id: number;
  type: string;
  cartesians: [number, number][] | string;
  radius: number | null;
  geometry_version: number;
  geometry_since: Date | string;
}

/** The shapes of geofence rows (`select id, name, floor_id, type, cartesians, radius, geometry_version, geometry_since`), and their names. */
export function shapesOf(fences: FenceRow[]) {
  const shapes: FenceShape[] = [];
  const names = new Map<string, string>();
  const pt = ([x, y]: [number, number]) => `(${x},${y})`;
  for (const fence of fences) {
    names.set(fence.id, fence.name);
    const points = typeof fence.cartesians === 'string' ? (JSON.parse(fence.cartesians) as [number, number][]) : fence.cartesians;
    const radius = fence.radius ?? DEFAULT_CAPTURE_RADIUS_M;
    const shape = {
      fenceId: fence.id,
      floorId: fence.floor_id,
      points,
      version: fence.geometry_version,
      since: new Date(fence.geometry_since),
    };
    if (points.length === 0) continue;
    if (fence.type === 'POLYGON') shapes.push({ ...shape, kind: 'polygon', literal: `(${points.map(pt).join(',')})`, radius: 0 });
    else if (fence.type === 'CIRCLE' || fence.type === 'POINT')
      shapes.push({ ...shape, points: [points[0]!], kind: 'disc', literal: '', radius });
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
  for (const [p, q] of [
    [-dx, ax - x0],
    [dx, x1 - ax],
    [-dy, ay - y0],
    [dy, y1 - ay],
  ] as const) {
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
  const corners: [number, number][] = [
    [rect[0], rect[1]],
    [rect[2], rect[1]],
    [rect[2], rect[3]],
    [rect[0], rect[3]],
  ];
  const { points, radius } = shape;
  if (shape.kind === 'disc') return corners.every(([x, y]) => Math.hypot(x - points[0]![0], y - points[0]![1]) < radius);
  if (shape.kind === 'path')
    return points.slice(1).some((b, i) => corners.every((corner) => distanceToSegment(corner, points[i]!, b) < radius));
  // Polygon: the corners inside and no edge entering the rectangle.
  // Boundary-inclusive here, but a corner on the boundary has an edge through it, which the next check refuses.
  if (!corners.every((corner) => pointInPolygon(corner, points))) return false;
  return !points.some((a, i) => segmentMeetsRect(a, points[(i + 1) % points.length]!, rect));
}

/** Distance from a point to the closed rectangle (0 inside it). */
function pointRectDistance([x, y]: [number, number], [x0, y0, x1, y1]: Rect): number {
  return Math.hypot(Math.max(x0 - x, 0, x - x1), Math.max(y0 - y, 0, y - y1));
}

/** Distance from the segment a-b to the closed rectangle (0 where they meet). */
function segmentRectDistance(a: [number, number], b: [number, number], rect: Rect): number {
  if (segmentMeetsRect(a, b, rect)) return 0;
  const corners: [number, number][] = [
    [rect[0], rect[1]],
    [rect[2], rect[1]],
    [rect[2], rect[3]],
    [rect[0], rect[3]],
  ];
  return Math.min(pointRectDistance(a, rect), pointRectDistance(b, rect), ...corners.map((corner) => distanceToSegment(corner, a, b)));
}

/**
 * Whether no point of the rectangle is inside the shape (then PostgreSQL's test would say so too: the rectangle
 * is the cell with CELL_MARGIN around it). A polygon with an edge shorter than 1 cm (but not 0) is never said to
 * miss a cell: PostgreSQL's boundary test is fuzzy by 1e-6 in the cross product of an edge and the point, so
 * about 1e-6 m divided by the edge's length, which stays under the margin only for edges of some length.
 */
function rectOutside(shape: FenceShape, rect: Rect): boolean {
  const { points, radius } = shape;
  if (shape.kind === 'disc') return pointRectDistance(points[0]!, rect) > radius;
  if (shape.kind === 'path') return points.slice(1).every((b, i) => segmentRectDistance(points[i]!, b, rect) > radius);
  const edges = points.map((a, i) => [a, points[(i + 1) % points.length]!] as const);
  if (edges.some(([a, b]) => (a[0] !== b[0] || a[1] !== b[1] ? Math.hypot(b[0] - a[0], b[1] - a[1]) < 0.01 : false))) return false;
  // No edge meets the rectangle: it is wholly inside or wholly outside, as its corner is (never on an edge).
  if (edges.some(([a, b]) => segmentMeetsRect(a, b, rect))) return false;
  return !pointInPolygon([rect[0], rect[1]], points);
}

/**
 * Geofence containment without joining every position to every geofence (the bounding-box join checked
 * positions x geofences pairs): a grid over each floor's geofences, stored as 2-D int arrays indexed by
 * `(x / cell)::int`, `(y / cell)::int` (rounded: cell i spans (i - 1/2, i + 1/2) cells). A cell lists the
 * shapes that can contain its points: +n when all of it is inside shape n (no test needed), -n when shape n
 * crosses it (PostgreSQL's own test decides, as before), nothing when shape n misses it (the cells of a shape's
 * bounding box that it misses: a rotated rectangle's are about as many as the ones it crosses, each a test that
 * always failed). Cells reached by several shapes hold them in
 * successive layers (arrays). An array lookup per position is far cheaper than a hash join to cells, which
 * alone took as long as the scan on a day of positions.
 */
export class FenceGrid {
  /** Shapes numbered from 1: by floor, then by kind (polygons, discs, paths), as `exact` expects. */
  readonly shapes: FenceShape[];
  readonly layers: number;
  private readonly floors: {
    floorId: number;
    base: number;
    shapes: FenceShape[];
    x0: number;
    y0: number;
    x1: number;
    y1: number;
    cells: number[][][];
  }[] = [];

  private constructor(
    shapes: FenceShape[],
    readonly cell: number,
  ) {
    const floorIds = [...new Set(shapes.map((shape) => shape.floorId))];
    this.shapes = floorIds.flatMap((floorId) =>
      SHAPE_KINDS.flatMap((kind) => shapes.filter((shape) => shape.floorId === floorId && shape.kind === kind)),
    );
    const perFloor = floorIds.map((floorId) => {
      const cells = new Map<string, { x: number; y: number; entries: number[] }>();
      this.shapes.forEach((shape, index) => {
        if (shape.floorId !== floorId) return;
        const box = shapeBox(shape);
        for (let x = Math.round(box[0] / cell) - 1; x <= Math.round(box[2] / cell) + 1; x++) {
          for (let y = Math.round(box[1] / cell) - 1; y <= Math.round(box[3] / cell) + 1; y++) {
            const rect: Rect = [
              (x - 0.5) * cell - CELL_MARGIN,
              (y - 0.5) * cell - CELL_MARGIN,
              (x + 0.5) * cell + CELL_MARGIN,
              (y + 0.5) * cell + CELL_MARGIN,
            ];
            if (rect[2] < box[0] || rect[0] > box[2] || rect[3] < box[1] || rect[1] > box[3]) continue;
            const entry = cells.get(`${x},${y}`) ?? { x, y, entries: [] };
            if (rectOutside(shape, rect)) continue;
            entry.entries.push(rectInside(shape, rect) ? index + 1 : -(index + 1));
            cells.set(`${x},${y}`, entry);
          }
        }
      });
      // A floor whose shapes miss every cell (none do that has an area) still gets an array, of one empty cell.
      return { floorId, entries: cells.size > 0 ? [...cells.values()] : [{ x: 0, y: 0, entries: [] }] };
    });
    this.layers = perFloor.reduce(
      (most, { entries }) => entries.reduce((inFloor, entry) => Math.max(inFloor, entry.entries.length), most),
      1,
    );
    for (const { floorId, entries } of perFloor) {
      // A loop, not Math.min(...): hundreds of thousands of arguments overflow the stack.
      let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity];
      for (const { x, y } of entries) [x0, y0, x1, y1] = [Math.min(x0, x), Math.min(y0, y), Math.max(x1, x), Math.max(y1, y)];
      const cells = Array.from({ length: this.layers }, () =>
        Array.from({ length: x1 - x0 + 1 }, () => new Array<number>(y1 - y0 + 1).fill(0)),
      );
      for (const entry of entries) {
        entry.entries.forEach((value, layer) => {
          cells[layer]![entry.x - x0]![entry.y - y0] = value;
        });
      }
      const base = this.shapes.findIndex((shape) => shape.floorId === floorId);
      this.floors.push({ floorId, base, shapes: this.shapes.filter((shape) => shape.floorId === floorId), x0, y0, x1, y1, cells });
    }
  }

  /** The finest cell size (from 0.5 m, doubling) that keeps the grid under `maxCells` (MAX_CELLS for a report). */
  static for(shapes: FenceShape[], maxCells = MAX_CELLS): FenceGrid {
    const extents = new Map<number, Rect>();
    for (const shape of shapes) {
      const [x0, y0, x1, y1] = shapeBox(shape);
      const extent = extents.get(shape.floorId);
      extents.set(
        shape.floorId,
        extent ? [Math.min(extent[0], x0), Math.min(extent[1], y0), Math.max(extent[2], x1), Math.max(extent[3], y1)] : [x0, y0, x1, y1],
      );
    }
    const count = (boxes: Rect[], size: number) =>
      boxes.reduce(
        (sum, [x0, y0, x1, y1]) =>
          sum + (Math.round(x1 / size) - Math.round(x0 / size) + 3) * (Math.round(y1 / size) - Math.round(y0 / size) + 3),
        0,
      );
    // The arrays span each floor's shapes, in as many layers as shapes overlap.
    const cells = (size: number) => Math.max(count([...extents.values()], size), count(shapes.map(shapeBox), size));
    let cell = 0.5;
    while (cells(cell) > maxCells) cell *= 2;
    let grid = new FenceGrid(shapes, cell);
    while (grid.size > 2 * maxCells) grid = new FenceGrid(shapes, (cell *= 2));
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
      const radius = at(
        of.map((s) => s.radius),
        'float8',
      );
      const test =
        kind === 'polygon'
          ? joinSql([
              at(
                of.map((s) => s.literal),
                'polygon',
              ),
              ' @> point(p.x, p.y)',
            ])
          : kind === 'disc'
            ? joinSql([
                'point(',
                at(
                  of.map((s) => s.points[0]![0]),
                  'float8',
                ),
                ', ',
                at(
                  of.map((s) => s.points[0]![1]),
                  'float8',
                ),
                ') <-> point(p.x, p.y) <= ',
                radius,
              ])
            : joinSql([
                'point(p.x, p.y) <-> ',
                at(
                  of.map((s) => s.literal),
                  'path',
                ),
                ' <= ',
                radius,
              ]);
      offset += of.length;
      branches.push({ last: offset, test });
    }
    if (branches.length === 1) return branches[0]!.test;
    return joinSql([
      '(case ',
      joinSql(
        branches.map(({ last, test }) => joinSql(['when ', n, ` <= ${last} then `, test])),
        ' ',
      ),
      ' end)',
    ]);
  }

  /**
   * For the materializer, whose process knows the grid: the entries of the cell of position `p` (an int[], for
   * rows `candidate` kept), from one array of every cell's entries and one of where each cell's starts (two
   * lookups and a slice, not a lookup per layer). A cell's positive entries (the shapes wholly covering it, which
   * need no test) are one entry, `shapes.length + k` for the k-th distinct set of them, `sets[shapes.length + k]`
   * listing its shape numbers; its crossing shapes follow, negative (see `relation` for their test). A position
   * brings one row for what covers it, not one per covering shape to hash-join and aggregate.
   */
  coveredEntries(): { entries: Sql; sets: number[][] } {
    const sets: number[][] = [];
    const codes = new Map<string, number>();
    const entries = this.perFloor((floor) => {
      const { x0, y0, y1, cells } = floor;
      const height = y1 - y0 + 1;
      const starts: number[] = [];
      const entries: number[] = [];
      cells[0]!.forEach((column, x) => {
        column.forEach((_, y) => {
          starts.push(entries.length + 1);
          const values = cells.map((layer) => layer[x]![y]!).filter((value) => value !== 0);
          const covering = values.filter((value) => value > 0);
          if (covering.length > 0) {
            const key = covering.join(',');
            let code = codes.get(key);
            if (code === undefined) {
              code = this.shapes.length + codes.size + 1;
              codes.set(key, code);
              sets[code] = covering;
            }
            entries.push(code);
          }
          for (const value of values) if (value < 0) entries.push(value);
        });
      });
      starts.push(entries.length + 1);
      const index = `((p.x * ${1 / this.cell})::int - ${x0}) * ${height} + (p.y * ${1 / this.cell})::int - ${y0} + 1`;
      const start = sqlOf(`(?::int[])[${index}]`, pgArray(starts));
      const end = sqlOf(`(?::int[])[${index} + 1] - 1`, pgArray(starts));
      return joinSql([sqlOf('(?::int[])[', pgArray(entries)), start, ':', end, ']']);
    });
    return { entries, sets };
  }

  /**
   * The shapes as a relation `f(n, kind, polygon, x, y, radius, path)`, `n` numbering them as `shapes` does, and
   * `inShape`, the test of `exact` against its row `f`: joined by shape number, a test finds its geometry by a
   * hash lookup (an array subscript walks a polygon[] from its start, as long as the floor's polygons).
   */
  get relation(): Sql {
    const of = (pick: (shape: FenceShape) => string | number | null) => pgArray(this.shapes.map(pick));
    return sqlOf(
      'unnest(?::text[], ?::polygon[], ?::float8[], ?::float8[], ?::float8[], ?::path[]) with ordinality as f(kind, polygon, x, y, radius, path, n)',
      of((shape) => shape.kind),
      of((shape) => (shape.kind === 'polygon' ? shape.literal : null)),
      of((shape) => (shape.kind === 'disc' ? shape.points[0]![0] : null)),
      of((shape) => (shape.kind === 'disc' ? shape.points[0]![1] : null)),
      of((shape) => shape.radius),
      of((shape) => (shape.kind === 'path' ? shape.literal : null)),
    );
  }

  static readonly inShape =
    "case f.kind when 'polygon' then f.polygon @> point(p.x, p.y) when 'disc' then point(f.x, f.y) <-> point(p.x, p.y) <= f.radius else point(p.x, p.y) <-> f.path <= f.radius end";

  /**
   * The shape number position `p` is in on layer `layer`, or 0 (for rows the WHERE clause kept). A cell wholly
   * inside costs one lookup (`greatest` keeps its positive number and `coalesce` stops there), and so does an
   * empty layer above the first (which every kept row fills).
   */
  hit(layer: number): Sql {
    return this.perFloor((floor) => {
      const code = this.cellOf(floor, layer, false);
      const n = joinSql(['(-', code, ')']);
      const hit = joinSql([
        'coalesce(nullif(greatest(',
        code,
        ', 0), 0), case when ',
        code,
        ' < 0 and ',
        this.exact(floor, n),
        ' then ',
        n,
        ' end, 0)',
      ]);
      return layer === 0 ? hit : joinSql(['case ', code, ' when 0 then 0 else ', hit, ' end']);
    });
  }
}
