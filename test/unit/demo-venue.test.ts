import { inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { demoFloorplanPng } from '../../demo/floorplan-png.js';
import { DEMO_EVENT, DEMO_GEOFENCES, DEMO_LENGTH_M, DEMO_POIS, DEMO_WIDTH_M, demoGraph } from '../../demo/venue.js';

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
    for (const point of [...nodes.map((n) => ({ x: n.x + 0.05, y: n.y - 0.05 })), ...DEMO_POIS, DEMO_EVENT]) {
      expect(shade(point.x, point.y), JSON.stringify(point)).not.toBe(40);
    }
  });
});
