import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { findSelfIntersection, intersectingPairs, segmentsIntersect, validateRing, type Point } from '../../../shared/geo/geometry.js';

/** The ring as validateRing sees it: consecutive repeats and the closing repeat removed. */
function distinctRing(points: readonly Point[]): Point[] {
  const ring: Point[] = [];
  for (const p of points) if (ring.length === 0 || ring[ring.length - 1]![0] !== p[0] || ring[ring.length - 1]![1] !== p[1]) ring.push(p);
  while (ring.length > 1 && ring[0]![0] === ring[ring.length - 1]![0] && ring[0]![1] === ring[ring.length - 1]![1]) ring.pop();
  return ring;
}

const adjacent = (i: number, j: number, n: number) => Math.abs(i - j) === 1 || Math.abs(i - j) === n - 1;

/** Asserts the sweep agrees with the O(n²) reference, and that a pair it names really is a crossing pair. */
function agrees(points: readonly Point[]): void {
  const ring = distinctRing(points);
  const found = findSelfIntersection(ring);
  const reference = intersectingPairs(ring);
  expect(found !== undefined, JSON.stringify(ring)).toBe(reference.length > 0);
  if (found) {
    const [i, j] = found;
    const n = ring.length;
    expect(i < j && !adjacent(i, j, n)).toBe(true);
    expect(segmentsIntersect(ring[i]!, ring[(i + 1) % n]!, ring[j]!, ring[(j + 1) % n]!)).toBe(true);
  }
}

describe('self-intersection sweep (Shamos–Hoey) against the O(n²) reference', () => {
  it('agrees on small rings on a tiny grid, where collinear, vertical and touching edges abound', () => {
    const point = fc.tuple(fc.integer({ min: 0, max: 4 }), fc.integer({ min: 0, max: 4 })) as fc.Arbitrary<Point>;
    fc.assert(
      fc.property(fc.array(point, { minLength: 3, maxLength: 12 }), (points) => agrees(points)),
      { numRuns: 20_000, seed: 13 },
    );
  });

  // Fractional coordinates (millimetre-ish steps over ±100 m) whose orientation products floating point computes
  // exactly; with rounding (denormals, 1e-300 next to 1) the reference's own predicate is not exact either.
  it('agrees on rings with fractional coordinates', () => {
    const coordinate = fc.integer({ min: -102_400, max: 102_400 }).map((k) => k / 1024);
    const point = fc.tuple(coordinate, coordinate) as fc.Arbitrary<Point>;
    fc.assert(
      fc.property(fc.array(point, { minLength: 3, maxLength: 30 }), (points) => agrees(points)),
      { numRuns: 3_000, seed: 13 },
    );
  });

  it('agrees on star-shaped rings, valid by construction unless a vertex is moved', () => {
    const star = fc
      .array(fc.integer({ min: 1, max: 6 }), { minLength: 4, maxLength: 40 })
      .chain((radii) =>
        fc.tuple(
          fc.constant(radii),
          fc.nat({ max: radii.length - 1 }),
          fc.tuple(fc.integer({ min: -8, max: 8 }), fc.integer({ min: -8, max: 8 })),
        ),
      );
    fc.assert(
      fc.property(star, ([radii, moved, to]) => {
        const ring = radii.map(
          (r, i): Point => [
            Math.round(r * 10 * Math.cos((2 * Math.PI * i) / radii.length)),
            Math.round(r * 10 * Math.sin((2 * Math.PI * i) / radii.length)),
          ],
        );
        agrees(ring);
        ring[moved] = [to[0] * 10, to[1] * 10];
        agrees(ring);
      }),
      { numRuns: 3_000, seed: 13 },
    );
  });

  it('validates a ring at the 10,000-vertex cap: a valid comb, then the same comb with one tooth bent across its neighbour', () => {
    // A comb: 2,500 teeth, so most edges cross the sweep line at once (the worst case for the sweep's order).
    const teeth = 2500;
    const ring: Point[] = [];
    for (let t = 0; t < teeth; t++) ring.push([t * 2, 0], [t * 2, 100], [t * 2 + 1, 100], [t * 2 + 1, 1]);
    ring.push([teeth * 2, 1], [teeth * 2, -10], [0, -10]);
    expect(ring.length).toBeGreaterThanOrEqual(10_000);
    expect(validateRing([...ring, ring[0]!])).toEqual([]);
    const bent = [...ring];
    bent[4 * 1200 + 1] = [1200 * 2 + 3, 100]; // the top of tooth 1200 leans over tooth 1201
    const problems = validateRing([...bent, bent[0]!]);
    expect(problems.map((p) => p.code)).toEqual(['self_intersection']);
    agrees(bent.slice(4 * 1195, 4 * 1205)); // and the sweep agrees with the reference around it
  });

  it('finds a crossing in a large circle with one vertex pulled out, as the reference does', () => {
    const ring: Point[] = [];
    for (let i = 0; i < 10_000; i++) ring.push([50 * Math.cos((i / 10_000) * 2 * Math.PI), 50 * Math.sin((i / 10_000) * 2 * Math.PI)]);
    expect(findSelfIntersection(ring)).toBeUndefined();
    ring[5000] = [60, 0];
    const found = findSelfIntersection(ring)!;
    expect(found).toBeDefined();
    expect(segmentsIntersect(ring[found[0]]!, ring[found[0] + 1]!, ring[found[1]]!, ring[(found[1] + 1) % ring.length]!)).toBe(true);
  });
});
