import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PathGraph, altitudeOf, type GraphFloor, type GraphLink, type GraphNode } from '../../../shared/routing/path-graph.js';

const link = (source: number, target: number, extra: Partial<GraphLink> = {}): GraphLink => ({
  source,
  target,
  origin: 'both',
  accessible: true,
  tags: [],
  ...extra,
});
const floors = (...heights: number[]): Map<number, GraphFloor> =>
  new Map(heights.map((height, level) => [level + 1, { level, levelHeight: height }]));

/**
 * Two floors 4 m apart, a 50 m corridor on each; stairs at x=0 (not accessible), a lift at x=50.
 *   floor 1:  1 ---- 2        floor 2:  3 ---- 4
 *             |stairs|lift              (same x)
 */
function twoFloors(): PathGraph {
  const nodes: GraphNode[] = [
    { id: 1, floor_id: 1, x: 0, y: 0 },
    { id: 2, floor_id: 1, x: 50, y: 0 },
    { id: 3, floor_id: 2, x: 0, y: 0 },
    { id: 4, floor_id: 2, x: 50, y: 0 },
  ];
  const links = [link(1, 2), link(3, 4), link(1, 3, { accessible: false, tags: ['stairs'] }), link(2, 4, { tags: ['elevator'] })];
  return new PathGraph(nodes, links, floors(0, 4));
}

describe('PathGraph', () => {
  it('snaps a point to the nearest point of the nearest link of its floor, reporting how far it moved', () => {
    const graph = twoFloors();
    const snap = graph.snap(1, 20, 3)!;
    expect(snap).toMatchObject({ floorId: 1, x: 20, y: 0, distance: 3 });
    expect(snap.t).toBeCloseTo(0.4);
    expect(graph.snap(1, -10, 0)).toMatchObject({ x: 0, y: 0, distance: 10 });
    expect(graph.snap(99, 0, 0)).toBeUndefined();
  });

  it('takes the stairs when they are shorter, and the lift when only accessible links may be used', () => {
    const graph = twoFloors();
    const from = graph.snap(1, 1, 0)!;
    const to = graph.snap(2, 1, 0)!;
    const shortest = graph.route(from, to)!;
    // 1 m back to the stairs, 4 m up, 1 m along.
    expect(shortest.distance).toBeCloseTo(6);
    expect(shortest.vertices.map((v) => v.floorId)).toEqual([1, 1, 2, 2]);
    const accessible = graph.route(graph.snap(1, 1, 0, { accessibleOnly: true })!, graph.snap(2, 1, 0, { accessibleOnly: true })!, {
      accessibleOnly: true,
    })!;
    expect(accessible.distance).toBeCloseTo(49 + 4 + 49);
    expect(
      accessible.vertices
        .map((v) => v.node)
        .filter((n) => n >= 0)
        .map((n) => graph.nodeIds[n]),
    ).toEqual([2, 4]);
  });

  it('finds no accessible route where only stairs join the floors', () => {
    const nodes: GraphNode[] = [
      { id: 1, floor_id: 1, x: 0, y: 0 },
      { id: 2, floor_id: 1, x: 10, y: 0 },
      { id: 3, floor_id: 2, x: 0, y: 0 },
      { id: 4, floor_id: 2, x: 10, y: 0 },
    ];
    const graph = new PathGraph(nodes, [link(1, 2), link(3, 4), link(2, 4, { accessible: false })], floors(0, 3));
    const from = graph.snap(1, 0, 0)!;
    const to = graph.snap(2, 0, 0)!;
    expect(graph.route(from, to)!.distance).toBeCloseTo(10 + 3 + 10);
    expect(graph.route(from, to, { accessibleOnly: true })).toBeUndefined();
  });

  it('crosses three floors, weighting each change by the floors’ altitudes', () => {
    // Level heights left at 0 above ground count as DEFAULT_STOREY_M per level.
    const floorMap = new Map<number, GraphFloor>([
      [1, { level: 0, levelHeight: 0 }],
      [2, { level: 1, levelHeight: 0 }],
      [3, { level: 2, levelHeight: 9 }],
    ]);
    expect(altitudeOf(floorMap.get(2)!)).toBe(3.5);
    const nodes: GraphNode[] = [
      { id: 1, floor_id: 1, x: 0, y: 0 },
      { id: 2, floor_id: 1, x: 10, y: 0 },
      { id: 3, floor_id: 2, x: 10, y: 0 },
      { id: 4, floor_id: 2, x: 10, y: 20 },
      { id: 5, floor_id: 3, x: 10, y: 20 },
      { id: 6, floor_id: 3, x: 30, y: 20 },
    ];
    const graph = new PathGraph(nodes, [link(1, 2), link(2, 3), link(3, 4), link(4, 5), link(5, 6)], floorMap);
    const route = graph.route(graph.snap(1, 0, 0)!, graph.snap(3, 30, 20)!)!;
    expect(route.distance).toBeCloseTo(10 + 3.5 + 20 + 5.5 + 20);
    expect([...new Set(route.vertices.map((v) => v.floorId))]).toEqual([1, 2, 3]);
  });

  it('walks one-way links only in their direction, and avoids blocked links', () => {
    // A square 0-1-2-3; the short side 0->1 is one-way from 1 to 0.
    const nodes: GraphNode[] = [
      { id: 0, floor_id: 1, x: 0, y: 0 },
      { id: 1, floor_id: 1, x: 10, y: 0 },
      { id: 2, floor_id: 1, x: 10, y: 10 },
      { id: 3, floor_id: 1, x: 0, y: 10 },
    ];
    const graph = new PathGraph(nodes, [link(0, 1, { origin: 'target' }), link(1, 2), link(2, 3), link(3, 0)], floors(0));
    const at0 = graph.snap(1, 0, 0.001)!;
    const at1 = graph.snap(1, 10, 0.001)!;
    expect(graph.route(at1, at0)!.distance).toBeCloseTo(10, 1);
    expect(graph.route(at0, at1)!.distance).toBeCloseTo(30, 1);
    // Blocking side 1-2 (index 1) leaves no way from 0 to 1 at all (the ends snap with the same options).
    const blocked = { blocked: new Set([1]) };
    expect(graph.route(graph.snap(1, 0, 0.001, blocked)!, graph.snap(1, 10, 0.001, blocked)!, blocked)).toBeUndefined();
  });

  it('routes along one link directly when both ends are on it', () => {
    const graph = twoFloors();
    const route = graph.route(graph.snap(1, 10, 1)!, graph.snap(1, 30, -1)!)!;
    expect(route.distance).toBeCloseTo(20);
    expect(route.vertices).toHaveLength(2);
  });

  // Random connected graphs on two floors: A* distances equal a plain Dijkstra's, and the reverse search
  // (distancesTo) gives the same distance from every start.
  it('agrees with a reference shortest-path search on random graphs', () => {
    const graphArbitrary = fc
      .record({
        points: fc.array(
          fc.record({ x: fc.integer({ min: 0, max: 40 }), y: fc.integer({ min: 0, max: 40 }), floor: fc.integer({ min: 1, max: 2 }) }),
          { minLength: 3, maxLength: 14 },
        ),
        extra: fc.array(
          fc.record({
            a: fc.nat(),
            b: fc.nat(),
            origin: fc.constantFrom('source', 'target', 'both') as fc.Arbitrary<GraphLink['origin']>,
            accessible: fc.boolean(),
          }),
          { maxLength: 20 },
        ),
        queries: fc.array(fc.record({ from: fc.nat(), to: fc.nat(), accessibleOnly: fc.boolean() }), { minLength: 1, maxLength: 5 }),
      })
      .map(({ points, extra, queries }) => {
        const nodes: GraphNode[] = points.map((p, id) => ({ id, floor_id: p.floor, x: p.x, y: p.y }));
        // A chain keeps most of it connected; extra links add shortcuts, one-ways and stairs.
        const links: GraphLink[] = nodes.slice(1).map((node, i) => link(i, node.id));
        for (const e of extra) links.push(link(e.a % nodes.length, e.b % nodes.length, { origin: e.origin, accessible: e.accessible }));
        return { nodes, links, queries };
      });
    fc.assert(
      fc.property(graphArbitrary, ({ nodes, links, queries }) => {
        const floorMap = floors(0, 5);
        const graph = new PathGraph(nodes, links, floorMap);
        for (const query of queries) {
          const a = nodes[query.from % nodes.length]!;
          const b = nodes[query.to % nodes.length]!;
          const options = { accessibleOnly: query.accessibleOnly };
          const from = graph.snap(a.floor_id, a.x, a.y, options);
          const to = graph.snap(b.floor_id, b.x, b.y, options);
          if (!from || !to) continue;
          const found = graph.route(from, to, options);
          const expected = referenceDistance(graph, from, to, options.accessibleOnly);
          if (expected === Infinity) expect(found).toBeUndefined();
          else {
            expect(found!.distance).toBeCloseTo(expected, 6);
            // The vertices' own lengths add up to the distance.
            let walked = 0;
            for (let i = 1; i < found!.vertices.length; i++) {
              const p = found!.vertices[i - 1]!;
              const q = found!.vertices[i]!;
              walked += Math.hypot(q.x - p.x, q.y - p.y) + Math.abs(graph.altitude(q.floorId) - graph.altitude(p.floorId));
            }
            expect(walked).toBeCloseTo(expected, 6);
          }
          expect(graph.distancesTo(to, options)(from)).toBeCloseTo(expected, 6);
        }
      }),
      { seed: 19, numRuns: 300 },
    );
  });
});

/** Dijkstra over an explicit edge list with the snapped ends as extra vertices: the slow, obvious way. */
function referenceDistance(
  graph: PathGraph,
  from: ReturnType<PathGraph['snap']> & {},
  to: ReturnType<PathGraph['snap']> & {},
  accessibleOnly: boolean,
): number {
  const n = graph.nodeCount;
  const edges: [number, number, number][] = [];
  graph.links.forEach((l, index) => {
    if (accessibleOnly && !l.accessible) return;
    const a = graph.linkA[index]!;
    const b = graph.linkB[index]!;
    const cost = graph.linkCost[index]!;
    const length = graph.linkLength[index]!;
    const forward = l.origin !== 'target';
    const backward = l.origin !== 'source';
    if (forward) edges.push([a, b, cost]);
    if (backward) edges.push([b, a, cost]);
    for (const [snap, vertex] of [
      [from, n],
      [to, n + 1],
    ] as const) {
      if (snap.link !== index) continue;
      // Split the link at the snapped point.
      if (forward) edges.push([a, vertex, snap.t * length], [vertex, b, (1 - snap.t) * length]);
      if (backward) edges.push([b, vertex, (1 - snap.t) * length], [vertex, a, snap.t * length]);
    }
  });
  if (from.link === to.link) {
    const l = graph.links[from.link]!;
    const length = graph.linkLength[from.link]!;
    if (to.t >= from.t && l.origin !== 'target') edges.push([n, n + 1, (to.t - from.t) * length]);
    if (to.t <= from.t && l.origin !== 'source') edges.push([n, n + 1, (from.t - to.t) * length]);
  }
  const distance = new Array<number>(n + 2).fill(Infinity);
  const done = new Array<boolean>(n + 2).fill(false);
  distance[n] = 0;
  for (;;) {
    let best = -1;
    for (let i = 0; i < n + 2; i++) if (!done[i] && distance[i]! < Infinity && (best === -1 || distance[i]! < distance[best]!)) best = i;
    if (best === -1) break;
    done[best] = true;
    for (const [u, v, w] of edges) if (u === best && distance[u]! + w < distance[v]!) distance[v] = distance[u]! + w;
  }
  return distance[n + 1]!;
}
