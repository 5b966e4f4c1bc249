/**
 * Planar geometry on floor cartesians ([x, y] in metres) for geofences and event areas. Pure and allocation-light
 * because it runs on the position hot path.
 */
import type { BuildingTransform } from './building-transform.js';

export type Point = readonly [number, number];

/** Same shape as an rbush item's box, so a result can be inserted or searched as is. */
export interface BBox {
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
}

export type RingProblemCode = 'non_finite' | 'too_few_points' | 'not_closed' | 'self_intersection' | 'zero_area';

export interface RingProblem {
  code: RingProblemCode;
  message: string;
  /** Index in the input of the first point concerned, where one point or edge is to blame. */
  index?: number;
}

// A ring with thousands of crossings would otherwise produce a response as large as the ring itself.
const MAX_REPORTED_INTERSECTIONS = 10;

/** >0 when a, b, c turn counter-clockwise, <0 clockwise, 0 when collinear. */
function orient(a: Point, b: Point, c: Point): number {
  return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
}

/** Whether p, known to be collinear with a-b, lies within the segment's box (so on the closed segment). */
function withinBox(p: Point, a: Point, b: Point): boolean {
  return Math.min(a[0], b[0]) <= p[0] && p[0] <= Math.max(a[0], b[0]) && Math.min(a[1], b[1]) <= p[1] && p[1] <= Math.max(a[1], b[1]);
}

function onSegment(p: Point, a: Point, b: Point): boolean {
  return orient(a, b, p) === 0 && withinBox(p, a, b);
}

/** Closed segments: touching at an endpoint or overlapping collinearly counts as intersecting. */
export function segmentsIntersect(a: Point, b: Point, c: Point, d: Point): boolean {
  const o1 = orient(a, b, c);
  const o2 = orient(a, b, d);
  const o3 = orient(c, d, a);
  const o4 = orient(c, d, b);
  if (((o1 > 0 && o2 < 0) || (o1 < 0 && o2 > 0)) && ((o3 > 0 && o4 < 0) || (o3 < 0 && o4 > 0))) return true;
  return (
    (o1 === 0 && withinBox(c, a, b)) ||
    (o2 === 0 && withinBox(d, a, b)) ||
    (o3 === 0 && withinBox(a, c, d)) ||
    (o4 === 0 && withinBox(b, c, d))
  );
}

function samePoint(a: Point, b: Point): boolean {
  return a[0] === b[0] && a[1] === b[1];
}

/**
 * Problems that make `points` unusable as a polygon ring; empty when it is valid. A ring must be closed (first
 * point repeated last, as the spec's samples are) and have at least 4 points. Repeated consecutive points are
 * accepted and ignored: map editors emit them on a double click, and they change neither the area nor which
 * points are inside. Touching itself at a vertex counts as self-intersection (the OGC "simple" rule), because
 * enter/exit on a pinched ring would depend on which lobe's edge a position crossed.
 */
export function validateRing(points: readonly Point[]): RingProblem[] {
  const bad = points.findIndex((p) => !Array.isArray(p) || p.length !== 2 || !Number.isFinite(p[0]) || !Number.isFinite(p[1]));
  if (bad >= 0) return [{ code: 'non_finite', message: `point ${bad} is not a pair of finite numbers`, index: bad }];
  const problems: RingProblem[] = [];
  if (points.length < 4) {
    problems.push({ code: 'too_few_points', message: `a ring needs at least 4 points, got ${points.length}` });
  }
  const closed = points.length > 0 && samePoint(points[0], points[points.length - 1]);
  if (!closed) problems.push({ code: 'not_closed', message: 'the last point must repeat the first' });

  // Distinct vertices of the implied closed ring, each with its index in the input for error messages.
  const vertices: Point[] = [];
  const origin: number[] = [];
  const end = closed ? points.length - 1 : points.length;
  for (let i = 0; i < end; i++) {
    if (vertices.length > 0 && samePoint(vertices[vertices.length - 1], points[i])) continue;
    vertices.push(points[i]);
    origin.push(i);
  }
  while (vertices.length > 1 && samePoint(vertices[0], vertices[vertices.length - 1])) {
    vertices.pop();
    origin.pop();
  }
  const n = vertices.length;
  if (n < 3 || Math.abs(signedArea(vertices)) <= 1e-12 * squaredExtent(vertices)) {
    problems.push({ code: 'zero_area', message: 'the ring encloses no area' });
  }
  if (n < 3) return problems;

  const found = findSelfIntersection(vertices);
  if (!found) return problems;
  // Which edges to name: on a small ring every crossing pair, as a person fixing it wants them (at most a few
  // thousand pair tests); on a large one, the pair found, so validation stays O(n log n) on the event loop.
  const pairs = n <= ENUMERATE_PAIRS_UP_TO ? intersectingPairs(vertices, MAX_REPORTED_INTERSECTIONS) : [found];
  for (const [i, j] of pairs) {
    problems.push({
      code: 'self_intersection',
      message: `edges starting at points ${origin[i]} and ${origin[j]} intersect`,
      index: origin[i],
    });
  }
  return problems;
}

/** Rings up to this many vertices get every intersecting pair named (the O(n²) enumeration costs ~1 ms there). */
const ENUMERATE_PAIRS_UP_TO = 256;

const adjacentEdges = (i: number, j: number, n: number) => Math.abs(i - j) === 1 || Math.abs(i - j) === n - 1;

/** The reference: every non-adjacent pair of edges, in order, tested directly. O(n²): small rings only (and tests). */
export function intersectingPairs(vertices: readonly Point[], limit = Number.POSITIVE_INFINITY): [number, number][] {
  const n = vertices.length;
  const pairs: [number, number][] = [];
  for (let i = 0; i < n && pairs.length < limit; i++) {
    const a = vertices[i];
    const b = vertices[(i + 1) % n];
    for (let j = i + 1; j < n && pairs.length < limit; j++) {
      // Adjacent edges share a vertex by construction. A spike folding back between them always also makes a
      // non-adjacent edge touch the spike, except in a 3-vertex collinear ring, which zero_area reports.
      if (adjacentEdges(i, j, n)) continue;
      if (segmentsIntersect(a, b, vertices[j], vertices[(j + 1) % n])) pairs.push([i, j]);
    }
  }
  return pairs;
}

/** Lexicographic order, x then y: the sweep's order of events, and which end of an edge is its left. */
function lexCompare(p: Point, q: Point): number {
  return p[0] !== q[0] ? p[0] - q[0] : p[1] - q[1];
}

interface SweepEdge {
  /** Index of the edge (the vertex it starts from). */
  id: number;
  left: Point;
  right: Point;
}

/**
 * Whether two edges that are not neighbours in the ring intersect (closed segments, as `segmentsIntersect`),
 * and if so one such pair [i, j] with i < j; in O(n log n) (Shamos–Hoey). The ring has distinct consecutive
 * vertices and no repeated closing point. Three degenerate cases are settled first, each in one pass: a
 * vertex repeated further on (the ring touches itself there), and a spike folding back along the edge it came
 * from. With those gone every vertex is a distinct point shared by exactly its two edges, and the sweep's
 * classic argument holds: until the leftmost intersection, the edges crossing the sweep line keep one order,
 * and the two edges meeting there are neighbours in it at some event, where they are tested.
 */
export function findSelfIntersection(vertices: readonly Point[]): [number, number] | undefined {
  const n = vertices.length;
  if (n < 4) return undefined; // a triangle's edges are all neighbours
  const at = (i: number) => vertices[((i % n) + n) % n];
  const ordered = Array.from({ length: n }, (_, i) => i).sort((i, j) => lexCompare(vertices[i], vertices[j]) || i - j);
  for (let k = 1; k < n; k++) {
    if (samePoint(vertices[ordered[k - 1]], vertices[ordered[k]])) {
      const [i, j] = [ordered[k - 1], ordered[k]].sort((x, y) => x - y);
      return [i, j];
    }
  }
  for (let i = 0; i < n; i++) {
    const a = at(i - 1);
    const b = at(i);
    const c = at(i + 1);
    const backwards = (b[0] - a[0]) * (c[0] - b[0]) + (b[1] - a[1]) * (c[1] - b[1]) < 0;
    if (orient(a, b, c) !== 0 || !backwards) continue;
    // The fold ends on the edge it came from (touching the edge after it), or runs back past that edge's start.
    const pair = withinBox(c, a, b) ? [(i - 1 + n) % n, (i + 1) % n] : [(i - 2 + 2 * n) % n, i];
    const [p, q] = pair.sort((x, y) => x - y);
    return [p, q];
  }

  const edges: SweepEdge[] = Array.from({ length: n }, (_, id) => {
    const p = vertices[id];
    const q = at(id + 1);
    return lexCompare(p, q) < 0 ? { id, left: p, right: q } : { id, left: q, right: p };
  });
  /** Below (<0) or above (>0) in the sweep's order; valid for edges that overlap in x and do not cross. */
  const compare = (s: SweepEdge, t: SweepEdge): number => {
    if (s === t) return 0;
    if (lexCompare(t.left, s.left) <= 0) {
      const o = orient(t.left, t.right, s.left) || orient(t.left, t.right, s.right);
      if (o !== 0) return o > 0 ? 1 : -1;
    } else {
      const o = orient(s.left, s.right, t.left) || orient(s.left, s.right, t.right);
      if (o !== 0) return o > 0 ? -1 : 1;
    }
    return s.id - t.id; // collinear and overlapping: an intersection the neighbour tests report
  };
  const status: SweepEdge[] = [];
  const position = (edge: SweepEdge) => {
    let lo = 0;
    let hi = status.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compare(status[mid], edge) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const test = (s: SweepEdge | undefined, t: SweepEdge | undefined): [number, number] | undefined => {
    if (!s || !t || adjacentEdges(s.id, t.id, n)) return undefined;
    if (!segmentsIntersect(s.left, s.right, t.left, t.right)) return undefined;
    return s.id < t.id ? [s.id, t.id] : [t.id, s.id];
  };
  for (const k of ordered) {
    const point = vertices[k];
    const incident = [edges[(k - 1 + n) % n], edges[k]];
    // Edges ending here leave before those starting here join: two edges meeting end to start at a vertex
    // are neighbours in the ring, never an intersection.
    for (const edge of incident) {
      if (!samePoint(edge.right, point)) continue;
      let index = position(edge);
      if (status[index] !== edge) index = status.indexOf(edge); // cannot happen while the order holds; never corrupt it
      status.splice(index, 1);
      const found = test(status[index - 1], status[index]);
      if (found) return found;
    }
    for (const edge of incident) {
      if (!samePoint(edge.left, point)) continue;
      const index = position(edge);
      status.splice(index, 0, edge);
      const found = test(status[index - 1], edge) ?? test(edge, status[index + 1]);
      if (found) return found;
    }
  }
  return undefined;
}

/** Shoelace area of an implicitly closed ring; positive when counter-clockwise. */
export function signedArea(ring: readonly Point[]): number {
  let twice = 0;
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
    twice += (ring[j][0] - ring[i][0]) * (ring[j][1] + ring[i][1]);
  }
  return twice / 2;
}

function squaredExtent(points: readonly Point[]): number {
  const box = bboxOf(points);
  return Math.max(box.maxX - box.minX, box.maxY - box.minY) ** 2;
}

/**
 * Ray casting; a point on an edge or vertex is inside, so a position standing on a fence line is not flapping
 * between in and out. The ring may be closed or not. `boundaryTolerance` (metres) widens "on the boundary" for
 * computed points that miss a slanted edge by a rounding error; 0 means exact.
 */
export function pointInPolygon(point: Point, ring: readonly Point[], boundaryTolerance = 0): boolean {
  const [px, py] = point;
  let inside = false;
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
    const a = ring[j];
    const b = ring[i];
    if (boundaryTolerance > 0 ? distanceToSegment(point, a, b) <= boundaryTolerance : onSegment(point, a, b)) {
      return true;
    }
    if (a[1] > py !== b[1] > py && px < ((b[0] - a[0]) * (py - a[1])) / (b[1] - a[1]) + a[0]) inside = !inside;
  }
  return inside;
}

/** A ring as one flat array `[x0, y0, x1, y1, ...]`: no object per vertex to chase on the hot path. */
export function flattenRing(ring: readonly Point[]): Float64Array {
  const flat = new Float64Array(ring.length * 2);
  ring.forEach(([x, y], i) => {
    flat[2 * i] = x;
    flat[2 * i + 1] = y;
  });
  return flat;
}

/** `pointInPolygon` (boundary inclusive, exact) over a flattened ring; same answers, no allocation. */
export function pointInFlatRing(px: number, py: number, ring: Float64Array): boolean {
  let inside = false;
  const n = ring.length;
  for (let i = 0, j = n - 2; i < n; j = i, i += 2) {
    const ax = ring[j]!;
    const ay = ring[j + 1]!;
    const bx = ring[i]!;
    const by = ring[i + 1]!;
    const collinear = (bx - ax) * (py - ay) - (by - ay) * (px - ax) === 0;
    if (collinear && Math.min(ax, bx) <= px && px <= Math.max(ax, bx) && Math.min(ay, by) <= py && py <= Math.max(ay, by)) return true;
    if (ay > py !== by > py && px < ((bx - ax) * (py - ay)) / (by - ay) + ax) inside = !inside;
  }
  return inside;
}

export function distanceToSegment(point: Point, a: Point, b: Point): number {
  const dx = b[0] - a[0];
  const dy = b[1] - a[1];
  const lengthSq = dx * dx + dy * dy;
  const t = lengthSq === 0 ? 0 : Math.max(0, Math.min(1, ((point[0] - a[0]) * dx + (point[1] - a[1]) * dy) / lengthSq));
  return Math.hypot(point[0] - (a[0] + t * dx), point[1] - (a[1] + t * dy));
}

/** Infinity for an empty line (the minimum over no segments), so a malformed LINE fence never matches. */
export function distanceToPolyline(point: Point, line: readonly Point[]): number {
  if (line.length === 1) return Math.hypot(point[0] - line[0][0], point[1] - line[0][1]);
  let best = Infinity;
  for (let i = 1; i < line.length; i++) best = Math.min(best, distanceToSegment(point, line[i - 1], line[i]));
  return best;
}

/** Throws RangeError on no points: an empty box has no sensible value to index. */
export function bboxOf(points: readonly Point[]): BBox {
  if (points.length === 0) throw new RangeError('bounding box of no points');
  const box = { minX: Infinity, minY: Infinity, maxX: -Infinity, maxY: -Infinity };
  for (const [x, y] of points) {
    if (x < box.minX) box.minX = x;
    if (x > box.maxX) box.maxX = x;
    if (y < box.minY) box.minY = y;
    if (y > box.maxY) box.maxY = y;
  }
  return box;
}

/** Boundary inclusive, like pointInPolygon. */
export function circleContains(center: Point, radius: number, point: Point): boolean {
  const dx = point[0] - center[0];
  const dy = point[1] - center[1];
  return dx * dx + dy * dy <= radius * radius;
}

/** A geofence's `geometric` entry: [lat, lng], the reverse of the [x, y] order of cartesians. */
export type LatLngPair = readonly [number, number];

export function geometricToCartesian(geometric: readonly LatLngPair[], transform: BuildingTransform): Point[] {
  return geometric.map(([lat, lng]) => {
    const { x, y } = transform.toCartesian({ lat, lng });
    return [x, y] as const;
  });
}

export function cartesianToGeometric(points: readonly Point[], transform: BuildingTransform): LatLngPair[] {
  return points.map(([x, y]) => {
    const { lat, lng } = transform.toGeo({ x, y });
    return [lat, lng] as const;
  });
}
