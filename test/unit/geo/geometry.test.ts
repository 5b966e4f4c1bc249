import { describe, expect, it } from 'vitest';
import { createBuildingTransform } from '../../../shared/geo/building-transform.js';
import {
  type Point,
  bboxOf,
  cartesianToGeometric,
  circleContains,
  distanceToPolyline,
  distanceToSegment,
  geometricToCartesian,
  flattenRing,
  pointInFlatRing,
  pointInPolygon,
  segmentsIntersect,
  validateRing,
} from '../../../shared/geo/geometry.js';

const square: Point[] = [
  [0, 0],
  [10, 0],
  [10, 10],
  [0, 10],
  [0, 0],
];
// A U open to the top: the notch spans x 2..4, y 2..6.
const u: Point[] = [
  [0, 0],
  [6, 0],
  [6, 6],
  [4, 6],
  [4, 2],
  [2, 2],
  [2, 6],
  [0, 6],
  [0, 0],
];

const codes = (ring: Point[]) => validateRing(ring).map((p) => p.code);

describe('validateRing', () => {
  it('accepts a closed square and a concave ring', () => {
    expect(validateRing(square)).toEqual([]);
    expect(validateRing(u)).toEqual([]);
  });

  it('reports an unclosed ring', () => {
    expect(codes(square.slice(0, 4))).toEqual(['not_closed']);
  });

  it('reports fewer than 4 points', () => {
    expect(
      codes([
        [0, 0],
        [1, 0],
        [0, 0],
      ]),
    ).toContain('too_few_points');
  });

  it('reports a bow-tie as self-intersecting, naming the crossing edges', () => {
    const problems = validateRing([
      [0, 0],
      [4, 4],
      [4, 0],
      [0, 2],
      [0, 0],
    ]);
    expect(problems.map((p) => p.code)).toContain('self_intersection');
    expect(problems.find((p) => p.code === 'self_intersection')?.index).toBe(0);
  });

  it('reports two lobes touching at one vertex', () => {
    const found = codes([
      [0, 0],
      [2, 0],
      [2, 2],
      [4, 2],
      [4, 4],
      [2, 4],
      [2, 2],
      [0, 2],
      [0, 0],
    ]);
    expect(new Set(found)).toEqual(new Set(['self_intersection']));
  });

  it('reports a spike that folds back along its own edge', () => {
    expect(
      codes([
        [0, 0],
        [4, 0],
        [4, 4],
        [6, 4],
        [4, 4],
        [0, 4],
        [0, 0],
      ]),
    ).toContain('self_intersection');
    // Same spike with the ring starting at its tip, so the fold is between the last edge and the first.
    expect(
      codes([
        [0, 6],
        [0, 0],
        [4, 0],
        [4, 4],
        [0, 4],
        [0, 6],
      ]),
    ).toContain('self_intersection');
    // A spike ending inside the edge it left, and one running back past its start.
    expect(
      codes([
        [0, 0],
        [4, 0],
        [4, 4],
        [4, 1],
        [0, 4],
        [0, 0],
      ]),
    ).toContain('self_intersection');
    expect(
      codes([
        [0, 0],
        [4, 0],
        [4, 4],
        [4, -1],
        [0, -1],
        [0, 0],
      ]),
    ).toContain('self_intersection');
  });

  it('accepts repeated consecutive points, including a repeated closing point', () => {
    expect(
      validateRing([
        [0, 0],
        [10, 0],
        [10, 0],
        [10, 10],
        [0, 10],
        [0, 0],
      ]),
    ).toEqual([]);
    expect(
      validateRing([
        [0, 0],
        [10, 0],
        [10, 10],
        [0, 10],
        [0, 0],
        [0, 0],
      ]),
    ).toEqual([]);
  });

  it('accepts collinear consecutive edges that continue straight on', () => {
    expect(
      validateRing([
        [0, 0],
        [5, 0],
        [10, 0],
        [10, 10],
        [0, 10],
        [0, 0],
      ]),
    ).toEqual([]);
  });

  it('reports a ring with no area', () => {
    expect(
      codes([
        [0, 0],
        [5, 0],
        [10, 0],
        [0, 0],
      ]),
    ).toContain('zero_area');
    expect(
      codes([
        [1, 1],
        [1, 1],
        [1, 1],
        [1, 1],
      ]),
    ).toContain('zero_area');
  });

  it('reports non-finite coordinates with their index', () => {
    expect(
      validateRing([
        [0, 0],
        [Number.NaN, 1],
        [1, 1],
        [0, 0],
      ]),
    ).toEqual([expect.objectContaining({ code: 'non_finite', index: 1 })]);
  });

  it('validates a 3000-vertex circle without false intersections', () => {
    const ring: Point[] = [];
    for (let i = 0; i < 3000; i++) ring.push([50 * Math.cos((i / 3000) * 2 * Math.PI), 50 * Math.sin((i / 3000) * 2 * Math.PI)]);
    ring.push(ring[0]);
    expect(validateRing(ring)).toEqual([]);
    ring[1500] = [60, 0];
    expect(codes(ring)).toContain('self_intersection');
  });
});

describe('pointInFlatRing', () => {
  it('answers as pointInPolygon does, boundaries included, on a grid over a concave ring', () => {
    const flat = flattenRing(u);
    let inside = 0;
    for (let x = -1; x <= 7; x += 0.25) {
      for (let y = -1; y <= 7; y += 0.25) {
        const expected = pointInPolygon([x, y], u);
        expect(pointInFlatRing(x, y, flat), `(${x}, ${y})`).toBe(expected);
        if (expected) inside++;
      }
    }
    expect(inside).toBeGreaterThan(100);
    expect(pointInFlatRing(3, 2, flat)).toBe(true); // on an edge of the notch
    expect(pointInFlatRing(3, 4, flat)).toBe(false); // in the notch
  });
});

describe('pointInPolygon', () => {
  it('tells inside from outside in a concave polygon', () => {
    expect(pointInPolygon([1, 4], u)).toBe(true);
    expect(pointInPolygon([5, 4], u)).toBe(true);
    expect(pointInPolygon([3, 1], u)).toBe(true);
    expect(pointInPolygon([3, 4], u)).toBe(false);
    expect(pointInPolygon([7, 1], u)).toBe(false);
    expect(pointInPolygon([-1, 3], u)).toBe(false);
  });

  it('counts edges and vertices as inside', () => {
    expect(pointInPolygon([3, 2], u)).toBe(true);
    expect(pointInPolygon([4, 6], u)).toBe(true);
    expect(pointInPolygon([0, 3], u)).toBe(true);
    expect(pointInPolygon([10, 10], square)).toBe(true);
  });

  it('is not fooled by a ray running along horizontal edges and through vertices', () => {
    expect(pointInPolygon([3, 6], u)).toBe(false);
    expect(pointInPolygon([-1, 2], u)).toBe(false);
    expect(pointInPolygon([-1, 6], u)).toBe(false);
    expect(pointInPolygon([5, 6], u)).toBe(true);
  });

  it('gives the same answers for an unclosed ring', () => {
    const open = u.slice(0, -1);
    expect(pointInPolygon([3, 4], open)).toBe(false);
    expect(pointInPolygon([5, 4], open)).toBe(true);
    expect(pointInPolygon([1, 6], open)).toBe(true);
  });

  it('widens the boundary by a tolerance only when asked', () => {
    expect(pointInPolygon([10.001, 5], square)).toBe(false);
    expect(pointInPolygon([10.001, 5], square, 0.01)).toBe(true);
  });
});

describe('distances', () => {
  it('measures to the nearest point of a segment, clamped to its ends', () => {
    expect(distanceToSegment([1, 1], [0, 0], [2, 0])).toBe(1);
    expect(distanceToSegment([3, 4], [0, 0], [2, 0])).toBeCloseTo(Math.sqrt(17), 12);
    expect(distanceToSegment([-3, 4], [0, 0], [2, 0])).toBe(5);
    expect(distanceToSegment([3, 4], [0, 0], [0, 0])).toBe(5);
  });

  it('measures to the nearest segment of a polyline', () => {
    const l: Point[] = [
      [0, 0],
      [10, 0],
      [10, 10],
    ];
    expect(distanceToPolyline([5, 3], l)).toBe(3);
    expect(distanceToPolyline([12, 8], l)).toBe(2);
    expect(distanceToPolyline([3, 4], [[0, 0]])).toBe(5);
    expect(distanceToPolyline([3, 4], [])).toBe(Infinity);
  });
});

describe('boxes and circles', () => {
  it('bounds a set of points', () => {
    expect(
      bboxOf([
        [3, -1],
        [-2, 5],
        [0, 0],
      ]),
    ).toEqual({ minX: -2, minY: -1, maxX: 3, maxY: 5 });
    expect(() => bboxOf([])).toThrow(RangeError);
  });

  it('contains the circle boundary but not beyond it', () => {
    expect(circleContains([1, 1], 5, [4, 5])).toBe(true);
    expect(circleContains([1, 1], 5, [4, 5.001])).toBe(false);
  });

  it('intersects touching and overlapping segments but not parallel ones', () => {
    expect(segmentsIntersect([0, 0], [2, 0], [2, 0], [3, 1])).toBe(true);
    expect(segmentsIntersect([0, 0], [2, 0], [1, 0], [3, 0])).toBe(true);
    expect(segmentsIntersect([0, 0], [2, 0], [0, 1], [2, 1])).toBe(false);
    expect(segmentsIntersect([0, 0], [4, 4], [0, 4], [4, 0])).toBe(true);
    expect(segmentsIntersect([0, 0], [4, 4], [0, 4], [1, 3])).toBe(false);
    // A T-junction, with the touching endpoint in each of the four argument positions.
    expect(segmentsIntersect([0, 0], [4, 0], [2, 0], [2, 3])).toBe(true);
    expect(segmentsIntersect([0, 0], [4, 0], [2, 3], [2, 0])).toBe(true);
    expect(segmentsIntersect([2, 0], [2, 3], [0, 0], [4, 0])).toBe(true);
    expect(segmentsIntersect([2, 3], [2, 0], [0, 0], [4, 0])).toBe(true);
    expect(segmentsIntersect([0, 0], [2, 0], [3, 0], [4, 0])).toBe(false);
  });
});

describe('geofence geometric <-> cartesians', () => {
  const t = createBuildingTransform({ location: { lat: 40.4168, lng: -3.7038 }, dimensions: { width: 120, length: 80 }, rotation: 0.7 });

  it('reads geometric pairs as [lat, lng] and writes cartesians as [x, y]', () => {
    const { lat, lng } = t.toGeo({ x: 10, y: 70 });
    const [[x, y]] = geometricToCartesian([[lat, lng]], t);
    expect(x).toBeCloseTo(10, 6);
    expect(y).toBeCloseTo(70, 6);
    const [[backLat, backLng]] = cartesianToGeometric([[10, 70]], t);
    expect(backLat).toBeCloseTo(lat, 10);
    expect(backLng).toBeCloseTo(lng, 10);
  });

  it('keeps a closed ring closed and valid through a round trip', () => {
    const ring: Point[] = [
      [5, 5],
      [50, 5],
      [50, 40],
      [5, 40],
      [5, 5],
    ];
    const back = geometricToCartesian(cartesianToGeometric(ring, t), t);
    expect(back[0]).toEqual(back[back.length - 1]);
    expect(validateRing(back)).toEqual([]);
    for (const [i, [x, y]] of back.entries()) expect(Math.hypot(x - ring[i][0], y - ring[i][1])).toBeLessThan(1e-6);
  });
});
