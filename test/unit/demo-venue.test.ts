import { inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { demoFloorplanPng } from '../../demo/floorplan-png.js';
import { DEMO_ASSEMBLY_POINTS, DEMO_EVENT, DEMO_GEOFENCES, DEMO_LENGTH_M, DEMO_POIS, DEMO_WIDTH_M, demoGraph } from '../../demo/venue.js';

const floorIds = [11, 12];
const { nodes, links } = demoGraph(floorIds);

describe('demo venue', () => {
  it('has one connected graph joining the floors by stairs (not accessible) and a lift (accessible)', () => {
    const seen = new Set([nodes[0]!.id]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const link of links) {
        if (seen.has(link.source) !== seen.has(link.target)) {
          seen.add(link.source).add(link.target);
          grew = true;
        }
      }
    }
    expect(seen.size).toBe(nodes.length);
    const between = links.filter(
      (link) => nodes.find((n) => n.id === link.source)!.floor_id !== nodes.find((n) => n.id === link.target)!.floor_id,
    );
    expect(between.map((link) => [link.tags, link.accessible])).toEqual([
      [['stairs'], false],
      [['elevator'], true],
    ]);
  });

  it('puts a graph node inside every geofence, so simulated devices can walk in and stay', () => {
    for (const fence of DEMO_GEOFENCES) {
      const [[x0, y0], , [x1, y1]] = fence.cartesians as [[number, number], unknown, [number, number]];
      expect(
        nodes.some((n) => n.floor_id === floorIds[fence.floor] && n.x > x0 && n.x < x1 && n.y > y0 && n.y < y1),
        fence.name,
      ).toBe(true);
    }
  });

  it('draws a floorplan PNG of the building at 10 px/m where no node, POI or event stands on a wall', () => {
    const png = demoFloorplanPng(10);
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    const width = png.readUInt32BE(16);
    const height = png.readUInt32BE(20);
    expect([width, height]).toEqual([DEMO_WIDTH_M * 10, DEMO_LENGTH_M * 10]);
    const idatLength = png.readUInt32BE(33);
    expect(png.subarray(37, 41).toString('ascii')).toBe('IDAT');
    const pixels = inflateSync(png.subarray(41, 41 + idatLength));
    expect(pixels.length).toBe((width + 1) * height);
    const shade = (x: number, y: number) => pixels[Math.floor((DEMO_LENGTH_M - y) * 10) * (width + 1) + 1 + Math.floor(x * 10)]!;
    const walls = [...pixels].filter((value) => value === 40).length;
    expect(walls).toBeGreaterThan(width * 4);
    const onPlan = (p: { x: number; y: number }) => p.x >= 0 && p.y >= 0 && p.x < DEMO_WIDTH_M && p.y < DEMO_LENGTH_M;
    for (const point of [...nodes.map((n) => ({ x: n.x + 0.05, y: n.y - 0.05 })), ...DEMO_POIS, DEMO_EVENT].filter(onPlan)) {
      expect(shade(point.x, point.y), JSON.stringify(point)).not.toBe(40);
    }
    // The ways out to the assembly points go through doors: no wall along them.
    const node = (id: number) => nodes.find((n) => n.id === id)!;
    for (const link of links.filter((l) => [l.source, l.target].some((id) => id >= 190 && id < 200))) {
      const [a, b] = [node(link.source), node(link.target)];
      for (let t = 0; t <= 1; t += 0.005) {
        const point = { x: a.x + (b.x - a.x) * t + 0.05, y: a.y + (b.y - a.y) * t - 0.05 };
        if (onPlan(point)) expect(shade(point.x, point.y), `${link.source}-${link.target} at ${JSON.stringify(point)}`).not.toBe(40);
      }
    }
  });

  it('reaches each assembly point, outside the footprint on the ground floor, by the graph', () => {
    for (const point of DEMO_ASSEMBLY_POINTS) {
      const xs = point.cartesians.map(([x]) => x);
      const ys = point.cartesians.map(([, y]) => y);
      const inside = (n: { x: number; y: number }) =>
        point.type === 'CIRCLE'
          ? Math.hypot(n.x - xs[0]!, n.y - ys[0]!) < point.radius!
          : n.x > Math.min(...xs) && n.x < Math.max(...xs) && n.y > Math.min(...ys) && n.y < Math.max(...ys);
      expect(Math.max(...xs) < 0 || Math.max(...ys) < 0, point.name).toBe(true);
      expect(
        nodes.some((n) => n.floor_id === floorIds[0] && inside(n)),
        point.name,
      ).toBe(true);
    }
  });
});
