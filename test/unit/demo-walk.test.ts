import { describe, expect, it } from 'vitest';
import { demoPersonName } from '../../demo/people.js';
import { DEMO_POI_CATEGORIES, DEMO_POI_CATEGORY_OF, poiIconPng } from '../../demo/poi-icons.js';
import { DEMO_POIS } from '../../demo/venue.js';
import { mulberry32, stepDevice, type Device, type Node } from '../../demo/simulator.js';

/** A corridor A(0,0) - B(20,0) - C(40,0) with a branch B - D(20,20): walkers must choose, stop, turn. */
function graph(): Record<'a' | 'b' | 'c' | 'd', Node> {
  const node = (id: number, x: number, y: number): Node => ({ id, floorId: 1, x, y, neighbours: [] });
  const nodes = { a: node(1, 0, 0), b: node(2, 20, 0), c: node(3, 40, 0), d: node(4, 20, 20) };
  for (const [p, q] of [
    [nodes.a, nodes.b],
    [nodes.b, nodes.c],
    [nodes.b, nodes.d],
  ] as const) {
    p.neighbours.push({ node: q, metres: 20 });
    q.neighbours.push({ node: p, metres: 20 });
  }
  return nodes;
}

/** Distance from (x, y) to the segment p-q. */
function toSegment(x: number, y: number, p: Node, q: Node): number {
  const dx = q.x - p.x;
  const dy = q.y - p.y;
  const t = Math.max(0, Math.min(1, ((x - p.x) * dx + (y - p.y) * dy) / (dx * dx + dy * dy)));
  return Math.hypot(x - (p.x + t * dx), y - (p.y + t * dy));
}

describe('demo walkers', () => {
  it('keep near the path graph but off its exact lines, stop a while at nodes, and sometimes turn back', () => {
    const { a, b, c, d } = graph();
    const random = mulberry32(27);
    const device: Device = { id: 'demo-01', role: 'walker', from: a, to: b, along: 3, lane: 0.5, phase: 0 };
    const poses: { x: number; y: number; yaw: number }[] = [];
    const visited: Node[] = [device.from];
    for (let tick = 0; tick < 3000; tick++) {
      const pose = stepDevice(device, 1, tick * 1000, 1.3, random) as { x: number; y: number; yaw: number };
      poses.push(pose);
      if (visited.at(-1) !== device.from) visited.push(device.from);
    }
    const offLine = poses.map((pose) =>
      Math.min(toSegment(pose.x, pose.y, a, b), toSegment(pose.x, pose.y, b, c), toSegment(pose.x, pose.y, b, d)),
    );
    // Never further from the graph than its lane and sway allow (the demo's doors are 2 m wide)...
    expect(Math.max(...offLine)).toBeLessThanOrEqual(1.06);
    // ...but not on its lines either: most poses are visibly to one side.
    expect(offLine.filter((metres) => metres > 0.2).length).toBeGreaterThan(poses.length / 3);
    // Stops: runs of at least three poses within half a metre of where the run began, looking about.
    let stops = 0;
    for (let i = 0; i + 2 < poses.length; i++) {
      if ([1, 2].every((k) => Math.hypot(poses[i + k]!.x - poses[i]!.x, poses[i + k]!.y - poses[i]!.y) < 0.5)) {
        stops++;
        while (i + 1 < poses.length && Math.hypot(poses[i + 1]!.x - poses[i]!.x, poses[i + 1]!.y - poses[i]!.y) < 0.5) i++;
      }
    }
    expect(stops).toBeGreaterThan(10);
    // Turning back at B, which has onward ways (A -> B -> A, C -> B -> C or D -> B -> D).
    const turnedBack = visited.some((node, i) => i >= 2 && visited[i - 1] === b && visited[i - 2] === node);
    expect(turnedBack).toBe(true);
    // And not always: walkers also carry on through B.
    const carriedOn = visited.some((node, i) => i >= 2 && visited[i - 1] === b && visited[i - 2] !== node);
    expect(carriedOn).toBe(true);
  });
});

describe('demo people and POI categories', () => {
  it('names people with a first name and a role, responders first', () => {
    expect(demoPersonName(0, 5)).toBe('Ana (nurse)');
    expect(demoPersonName(1, 5)).toBe('Ben (doctor)');
    expect(demoPersonName(5, 5)).toBe('Farid (patient)');
    const names = Array.from({ length: 50 }, (_, i) => demoPersonName(i, 5));
    expect(new Set(names).size).toBe(50);
    for (const name of names) expect(name).toMatch(/^\p{L}+ \([a-z]+\)$/u);
    expect(demoPersonName(50, 5)).toBe('Ana 2 (technician)');
  });

  it('gives the seeded defibrillator, first-aid kit, entrance and nurses station a category with an icon', () => {
    const codes = new Set(DEMO_POI_CATEGORIES.map((category) => category.code));
    for (const name of ['Main entrance', 'Defibrillator', 'First-aid kit', 'Nurses station']) {
      expect(
        DEMO_POIS.some((poi) => poi.name === name),
        name,
      ).toBe(true);
      expect(codes.has(DEMO_POI_CATEGORY_OF[name]!), name).toBe(true);
    }
    for (const category of DEMO_POI_CATEGORIES) {
      const png = poiIconPng(category, 48);
      expect(png.subarray(1, 4).toString('ascii')).toBe('PNG');
      expect([png.readUInt32BE(16), png.readUInt32BE(20), png[24], png[25]]).toEqual([48, 48, 8, 6]); // 48 x 48, 8-bit RGBA
    }
  });
});
