import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Point } from '../../../shared/geo/geometry.js';
import {
  type EventSource,
  type GeofenceSource,
  type Zone,
  ZoneIndex,
  zoneBBox,
  zoneContains,
  zonesFromCartography,
} from '../../../shared/detection/zone-index.js';

const ids = (zones: Zone[]) => zones.map((z) => z.id).sort();

// A U open to the top: the notch spans x 2..4, y 2..6 and lies inside the polygon's bounding box.
const uRing: Point[] = [
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

const fence = (over: Partial<GeofenceSource> & Pick<GeofenceSource, 'id' | 'type' | 'cartesians'>): GeofenceSource => ({
  floorId: 1,
  radius: null,
  deleted: false,
  ...over,
});

describe('ZoneIndex', () => {
  it('tests a concave polygon exactly: inside its box but in the notch is not tagged', () => {
    const index = new ZoneIndex([{ id: 'u', kind: 'geofence', floorId: 1, shape: { type: 'polygon', ring: uRing } }]);
    expect(ids(index.zonesAt(1, 3, 4))).toEqual([]);
    expect(ids(index.zonesAt(1, 1, 4))).toEqual(['u']);
    expect(ids(index.zonesAt(1, 3, 1))).toEqual(['u']);
    // On the edge counts as inside, so a position standing on the line does not flap.
    expect(ids(index.zonesAt(1, 4, 4))).toEqual(['u']);
  });

  it('tests circles by distance, not by their square box', () => {
    const index = new ZoneIndex([{ id: 'c', kind: 'event', floorId: 1, shape: { type: 'circle', center: [10, 10], radius: 5 } }]);
    expect(ids(index.zonesAt(1, 14, 13))).toEqual(['c']); // distance 5: boundary
    expect(ids(index.zonesAt(1, 14.5, 14.5))).toEqual([]); // inside the box, outside the circle
  });

  it('captures around points and lines within their radius', () => {
    const index = new ZoneIndex([
      { id: 'p', kind: 'geofence', floorId: 1, shape: { type: 'point', point: [0, 0], radius: 2 } },
      {
        id: 'l',
        kind: 'geofence',
        floorId: 1,
        shape: {
          type: 'line',
          points: [
            [10, 0],
            [20, 0],
            [20, 10],
          ],
          radius: 1,
        },
      },
    ]);
    expect(ids(index.zonesAt(1, 1.9, 0))).toEqual(['p']);
    expect(ids(index.zonesAt(1, 1.5, 1.5))).toEqual([]); // 2.12 m away, inside the box
    expect(ids(index.zonesAt(1, 15, 0.9))).toEqual(['l']);
    expect(ids(index.zonesAt(1, 20.9, 5))).toEqual(['l']);
    expect(ids(index.zonesAt(1, 15, 5))).toEqual([]); // in the line's box, far from both segments
    expect(ids(index.zonesAt(1, 15, 1.1))).toEqual([]);
  });

  it('keeps floors apart', () => {
    const square: Point[] = [
      [0, 0],
      [10, 0],
      [10, 10],
      [0, 10],
      [0, 0],
    ];
    const index = new ZoneIndex([
      { id: 'ground', kind: 'geofence', floorId: 1, shape: { type: 'polygon', ring: square } },
      { id: 'first', kind: 'geofence', floorId: 2, shape: { type: 'polygon', ring: square } },
    ]);
    expect(ids(index.zonesAt(1, 5, 5))).toEqual(['ground']);
    expect(ids(index.zonesAt(2, 5, 5))).toEqual(['first']);
    expect(index.zonesAt(3, 5, 5)).toEqual([]);
  });

  it('returns every overlapping zone', () => {
    const index = new ZoneIndex([
      { id: 'a', kind: 'geofence', floorId: 1, shape: { type: 'circle', center: [0, 0], radius: 5 } },
      { id: 'b', kind: 'geofence', floorId: 1, shape: { type: 'circle', center: [4, 0], radius: 5 } },
    ]);
    expect(ids(index.zonesAt(1, 2, 0))).toEqual(['a', 'b']);
  });

  it('leaves out unusable shapes instead of failing the whole rebuild', () => {
    const index = new ZoneIndex([
      { id: 'empty', kind: 'geofence', floorId: 1, shape: { type: 'polygon', ring: [] } },
      { id: 'nan', kind: 'geofence', floorId: 1, shape: { type: 'circle', center: [Number.NaN, 0], radius: 1 } },
      { id: 'ok', kind: 'geofence', floorId: 1, shape: { type: 'circle', center: [0, 0], radius: 1 } },
    ]);
    expect(index.size).toBe(1);
    expect(ids(index.zonesAt(1, 0, 0))).toEqual(['ok']);
  });

  it('stays exact with 10,000 zones: same answer as testing every zone', () => {
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const zones: Zone[] = [];
    for (let i = 0; i < 10_000; i++) {
      const x = random() * 1000;
      const y = random() * 1000;
      const floorId = 1 + (i % 3);
      const s = 1 + random() * 10;
      const kind = i % 4;
      const shape: Zone['shape'] =
        kind === 0
          ? {
              type: 'polygon',
              ring: [
                [x, y],
                [x + 2 * s, y],
                [x + 2 * s, y + 2 * s],
                [x + s, y + 0.5 * s],
                [x, y + 2 * s],
                [x, y],
              ],
            }
          : kind === 1
            ? { type: 'circle', center: [x, y], radius: s }
            : kind === 2
              ? { type: 'point', point: [x, y], radius: s / 4 }
              : {
                  type: 'line',
                  points: [
                    [x, y],
                    [x + s, y + s],
                    [x + 2 * s, y],
                  ],
                  radius: 0.5,
                };
      zones.push({ id: `z${i}`, kind: 'geofence', floorId, shape });
    }
    const index = new ZoneIndex(zones);
    expect(index.size).toBe(10_000);
    let tagged = 0;
    for (let i = 0; i < 1000; i++) {
      const floorId = 1 + (i % 3);
      const x = random() * 1000;
      const y = random() * 1000;
      const expected = zones
        .filter((z) => z.floorId === floorId && zoneContains(z, x, y))
        .map((z) => z.id)
        .sort();
      expect(ids(index.zonesAt(floorId, x, y))).toEqual(expected);
      tagged += expected.length;
    }
    // Otherwise the comparison would pass trivially on empty answers.
    expect(tagged).toBeGreaterThan(50);

    // A device walking 0.3 m steps, changing floor now and then: positions answered from grid cells filled
    // by earlier ones give the same answer.
    let walkTagged = 0;
    let [x, y, floorId] = [500, 500, 1];
    const into: Zone[] = [];
    for (let i = 0; i < 5000; i++) {
      const angle = random() * 2 * Math.PI;
      x += 0.3 * Math.cos(angle);
      y += 0.3 * Math.sin(angle);
      if (i % 500 === 499) floorId = 1 + (floorId % 3);
      const expected = zones
        .filter((z) => z.floorId === floorId && zoneContains(z, x, y))
        .map((z) => z.id)
        .sort();
      expect(ids(index.zonesAt(floorId, x, y, into))).toEqual(expected);
      walkTagged += expected.length;
    }
    expect(walkTagged).toBeGreaterThan(50);
  });

  it('answers as testing every zone, for any shapes and positions (property)', () => {
    // Coordinates on a 1/8 m lattice put vertices, edges and positions on grid cell lines and corners, where a
    // cell decided once for all its points would be wrong if it were decided carelessly.
    const coordinate = fc.integer({ min: -40, max: 200 }).map((n) => n / 8);
    const point = fc.tuple(coordinate, coordinate);
    const shape: fc.Arbitrary<Zone['shape']> = fc.oneof(
      fc.array(point, { minLength: 3, maxLength: 8 }).map((ring) => ({ type: 'polygon' as const, ring: [...ring, ring[0]!] })),
      fc
        .tuple(point, fc.integer({ min: 1, max: 64 }), fc.integer({ min: 1, max: 64 }), fc.double({ min: 0, max: Math.PI, noNaN: true }))
        .map(([[cx, cy], w, h, angle]) => {
          const [cos, sin] = [Math.cos(angle), Math.sin(angle)];
          const corners = [
            [-w, -h],
            [w, -h],
            [w, h],
            [-w, h],
          ].map(([dx, dy]): Point => [cx + (dx! * cos - dy! * sin) / 16, cy + (dx! * sin + dy! * cos) / 16]);
          return { type: 'polygon' as const, ring: [...corners, corners[0]!] };
        }),
      fc.tuple(point, fc.integer({ min: 0, max: 40 })).map(([center, r]) => ({ type: 'circle' as const, center, radius: r / 8 })),
      fc.tuple(point, fc.integer({ min: 0, max: 40 })).map(([at, r]) => ({ type: 'point' as const, point: at, radius: r / 8 })),
      fc
        .tuple(fc.array(point, { minLength: 1, maxLength: 4 }), fc.integer({ min: 0, max: 16 }))
        .map(([points, r]) => ({ type: 'line' as const, points, radius: r / 8 })),
    );
    const position = fc.oneof(point, fc.tuple(fc.double({ min: -6, max: 26, noNaN: true }), fc.double({ min: -6, max: 26, noNaN: true })));
    fc.assert(
      fc.property(
        fc.array(shape, { minLength: 1, maxLength: 12 }),
        fc.array(position, { minLength: 1, maxLength: 40 }),
        (shapes, positions) => {
          const zones: Zone[] = shapes.map((zoneShape, i) => ({ id: `z${i}`, kind: 'geofence', floorId: 1, shape: zoneShape }));
          const index = new ZoneIndex(zones);
          // What the tree alone answered: the exact test behind the zone's box (a point a rounding error past the
          // box is not tagged, even where the exact test alone would say it is).
          const inBox = (zone: Zone, x: number, y: number) => {
            const box = zoneBBox(zone.shape);
            return box !== null && box.minX <= x && x <= box.maxX && box.minY <= y && y <= box.maxY;
          };
          // Twice: once filling the cells, once answered from them.
          for (const [x, y] of [...positions, ...positions]) {
            const expected = zones
              .filter((zone) => inBox(zone, x, y) && zoneContains(zone, x, y))
              .map((zone) => zone.id)
              .sort();
            expect(ids(index.zonesAt(1, x, y))).toEqual(expected);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('answers as testing every zone for polygons of many vertices, each cell of a block placed in one pass (seeded property, issue 28 item 6)', () => {
    // Stars and scribbles of up to 400 vertices, convex, concave and self-crossing, some on a 1/4 m lattice (edges
    // along cell lines, through cell corners and centres); positions at cell centres (what decides a whole cell),
    // corners, vertices and anywhere.
    const lattice = (n: number) => Math.round(n * 4) / 4;
    const polygon = fc
      .record({
        cx: fc.double({ min: 0, max: 20, noNaN: true }),
        cy: fc.double({ min: 0, max: 20, noNaN: true }),
        radii: fc.array(fc.double({ min: 0.2, max: 14, noNaN: true }), { minLength: 3, maxLength: 400 }),
        turns: fc.integer({ min: 1, max: 3 }),
        snapped: fc.boolean(),
      })
      .map(({ cx, cy, radii, turns, snapped }): Zone['shape'] => {
        const ring = radii.map((radius, i): Point => {
          const angle = (2 * Math.PI * turns * i) / radii.length;
          const x = cx + radius * Math.cos(angle);
          const y = cy + radius * Math.sin(angle);
          return snapped ? [lattice(x), lattice(y)] : [x, y];
        });
        return { type: 'polygon', ring: [...ring, ring[0]!] };
      });
    const cellPoint = fc.tuple(fc.integer({ min: -12, max: 34 }), fc.integer({ min: -12, max: 34 }), fc.constantFrom(0, 0.5));
    fc.assert(
      fc.property(
        fc.array(polygon, { minLength: 1, maxLength: 6 }),
        fc.array(cellPoint, { minLength: 1, maxLength: 30 }),
        fc.array(fc.tuple(fc.double({ min: -12, max: 34, noNaN: true }), fc.double({ min: -12, max: 34, noNaN: true })), { maxLength: 30 }),
        (shapes, cellPoints, anywhere) => {
          const zones: Zone[] = shapes.map((zoneShape, i) => ({ id: `z${i}`, kind: 'geofence', floorId: 1, shape: zoneShape }));
          const index = new ZoneIndex(zones);
          const vertices = zones.flatMap((zone) => (zone.shape.type === 'polygon' ? zone.shape.ring.slice(0, 8) : []));
          const positions: Point[] = [...cellPoints.map(([x, y, offset]): Point => [x + offset, y + offset]), ...vertices, ...anywhere];
          for (const [x, y] of [...positions, ...positions]) {
            const expected = zones
              .filter((zone) => {
                const box = zoneBBox(zone.shape)!;
                return box.minX <= x && x <= box.maxX && box.minY <= y && y <= box.maxY && zoneContains(zone, x, y);
              })
              .map((zone) => zone.id)
              .sort();
            expect(ids(index.zonesAt(1, x, y))).toEqual(expected);
          }
        },
      ),
      { numRuns: 200, seed: 28_6 },
    );
  });

  it('answers far from the origin, and outside every zone, without a cell', () => {
    const far = 1e9;
    const index = new ZoneIndex([
      {
        id: 'far',
        kind: 'geofence',
        floorId: 1,
        shape: {
          type: 'polygon',
          ring: [
            [far, far],
            [far + 10, far],
            [far + 10, far + 10],
            [far, far],
          ],
        },
      },
      { id: 'near', kind: 'geofence', floorId: 1, shape: { type: 'circle', center: [0, 0], radius: 2 } },
    ]);
    expect(ids(index.zonesAt(1, far + 8, far + 1))).toEqual(['far']);
    expect(ids(index.zonesAt(1, far + 1, far + 8))).toEqual([]);
    expect(ids(index.zonesAt(1, 1, 1))).toEqual(['near']);
    expect(ids(index.zonesAt(1, Number.NaN, 0))).toEqual([]);
  });

  it('empties the array it is handed before filling it', () => {
    const index = new ZoneIndex([{ id: 'a', kind: 'geofence', floorId: 1, shape: { type: 'circle', center: [0, 0], radius: 5 } }]);
    const into = index.zonesAt(1, 0, 0);
    expect(index.zonesAt(1, 9, 9, into)).toBe(into);
    expect(into).toEqual([]);
    expect(ids(index.zonesAt(1, 1, 1, into))).toEqual(['a']);
  });
});

describe('zonesFromCartography', () => {
  const event = (over: Partial<EventSource> = {}): EventSource => ({
    id: 7,
    floorId: 1,
    x: 50,
    y: 50,
    radius: 3,
    conversion: null,
    ...over,
  });

  it('names zones by geofence uuid, event:<id> and conversion:<id>', () => {
    const zones = zonesFromCartography(
      [fence({ id: 'f1', type: 'CIRCLE', cartesians: [[0, 0]], radius: 4 })],
      [event({ conversion: { floorId: 2, x: 60, y: 60, radius: 2 } })],
    );
    expect(zones.map((z) => [z.id, z.kind, z.floorId])).toEqual([
      ['f1', 'geofence', 1],
      ['event:7', 'event', 1],
      ['conversion:7', 'conversion', 2],
    ]);
    const index = new ZoneIndex(zones);
    expect(ids(index.zonesAt(1, 3, 0))).toEqual(['f1']);
    expect(ids(index.zonesAt(1, 52, 50))).toEqual(['event:7']);
    expect(ids(index.zonesAt(2, 61, 61))).toEqual(['conversion:7']);
    expect(ids(index.zonesAt(1, 61, 61))).toEqual([]);
  });

  it('skips deleted geofences', () => {
    const zones = zonesFromCartography([fence({ id: 'gone', type: 'POLYGON', cartesians: uRing, deleted: true })], []);
    expect(zones).toEqual([]);
  });

  it('gives POINT and LINE a 1 m capture radius when theirs is null', () => {
    const index = new ZoneIndex(
      zonesFromCartography(
        [
          fence({ id: 'p', type: 'POINT', cartesians: [[0, 0]] }),
          fence({
            id: 'l',
            type: 'LINE',
            cartesians: [
              [10, 0],
              [20, 0],
            ],
          }),
          fence({ id: 'wide', type: 'POINT', cartesians: [[40, 0]], radius: 3 }),
        ],
        [],
      ),
    );
    expect(ids(index.zonesAt(1, 0.9, 0))).toEqual(['p']);
    expect(ids(index.zonesAt(1, 1.1, 0))).toEqual([]);
    expect(ids(index.zonesAt(1, 15, 1))).toEqual(['l']);
    expect(ids(index.zonesAt(1, 15, 1.1))).toEqual([]);
    expect(ids(index.zonesAt(1, 42.9, 0))).toEqual(['wide']);
  });

  it('keeps polygons as polygons, not boxes', () => {
    const index = new ZoneIndex(zonesFromCartography([fence({ id: 'u', type: 'POLYGON', cartesians: uRing })], []));
    expect(ids(index.zonesAt(1, 3, 4))).toEqual([]);
    expect(ids(index.zonesAt(1, 5, 4))).toEqual(['u']);
  });

  it('drops a CIRCLE without radius rather than inventing one', () => {
    expect(zonesFromCartography([fence({ id: 'c', type: 'CIRCLE', cartesians: [[0, 0]], radius: null })], [])).toEqual([]);
  });
});
