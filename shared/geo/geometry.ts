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
  return (
    Math.min(a[0], b[0]) <= p[0] && p[0] <= Math.max(a[0], b[0]) &&
    Math.min(a[1], b[1]) <= p[1] && p[1] <= Math.max(a[1], b[1])
  );
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
    (o1 === 0 && withinBox(c, a, b)) || (o2 === 0 && withinBox(d, a, b)) ||
    (o3 === 0 && withinBox(a, c, d)) || (o4 === 0 && withinBox(b, c, d))
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

  let reported = 0;
  for (let i = 0; i < n && reported < MAX_REPORTED_INTERSECTIONS; i++) {
    const a = vertices[i];
    const b = vertices[(i + 1) % n];
    for (let j = i + 1; j < n && reported < MAX_REPORTED_INTERSECTIONS; j++) {
      const c = vertices[j];
      const d = vertices[(j + 1) % n];
      // Adjacent edges share a vertex by construction. A spike folding back between them always also makes a
      // non-adjacent edge touch the spike, except in a 3-vertex collinear ring, which zero_area reports.
      if (j === i + 1 || (i === 0 && j === n - 1)) continue;
      if (segmentsIntersect(a, b, c, d)) {
        problems.push({
          code: 'self_intersection',
          message: `edges starting at points ${origin[i]} and ${origin[j]} intersect`,
          index: origin[i],
        });
        reported++;
      }
    }
  }
  return problems;
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
