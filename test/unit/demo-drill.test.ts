import { describe, expect, it } from 'vitest';
import { arrived, musterTargets, planEvacuation, stepEvacuee, type GraphNode } from '../../demo/drill.js';
import { mulberry32 } from '../../demo/simulator.js';

/** A corridor on floor 1 from (0, 0) to (100, 0), a lift at x=100 up to floor 2, and a way out at each end. */
function corridor() {
  const node = (id: number, floorId: number, x: number, y: number): GraphNode => ({ id, floorId, x, y, neighbours: [] });
  const nodes = [node(1, 1, 0, 0), node(2, 1, 50, 0), node(3, 1, 100, 0), node(4, 2, 100, 0), node(5, 1, -20, 0), node(6, 1, 130, 0)];
  const link = (a: number, b: number, metres: number) => {
    nodes[a - 1]!.neighbours.push({ node: nodes[b - 1]!, metres });
    nodes[b - 1]!.neighbours.push({ node: nodes[a - 1]!, metres });
  };
  link(1, 2, 50);
  link(2, 3, 50);
  link(3, 4, 8);
  link(1, 5, 20);
  link(3, 6, 30);
  return nodes;
}

const fences = [
  { id: 'w', name: 'West', floor_id: 1, type: 'CIRCLE', cartesians: [[-20, 0]] as [number, number][], radius: 5, muster_point: true },
  {
    id: 'e',
    name: 'East',
    floor_id: 1,
    type: 'POLYGON',
    cartesians: [
      [125, -5],
      [135, -5],
      [135, 5],
      [125, 5],
      [125, -5],
    ] as [number, number][],
    radius: null,
    muster_point: true,
  },
  { id: 'z', name: 'Ward', floor_id: 1, type: 'POLYGON', cartesians: [[0, 0]] as [number, number][], radius: null },
];

describe('the demo drill', () => {
  it('sends each person to the assembly point nearest by walking, along the graph, at their own pace after their delay', () => {
    const nodes = corridor();
    const targets = musterTargets(fences, nodes);
    expect(targets.map((t) => [t.name, t.node.id])).toEqual([
      ['West', 5],
      ['East', 6],
    ]);
    const random = mulberry32(3);
    // Upstairs above the lift: the east point (38 m by the lift and corridor end) beats the west one (128 m).
    const upstairs = planEvacuation({ floorId: 2, x: 100, y: 0 }, nodes[3]!, targets, { startAt: 2000, speedMps: 2 }, random)!;
    expect(upstairs.target).toBe('East');
    expect(upstairs.waypoints.map((w) => w.floorId)).toEqual([2, 2, 1, 1, 1]);
    // Standing still before it reacts.
    expect(stepEvacuee(upstairs, 1, 1000, random)).toMatchObject({ floor_id: 2, x: 100, y: 0 });
    let pose: Record<string, unknown> = {};
    for (let t = 2000; !arrived(upstairs) && t < 60_000; t += 1000) pose = stepEvacuee(upstairs, 1, t, random);
    expect(arrived(upstairs)).toBe(true);
    pose = stepEvacuee(upstairs, 1, 61_000, random);
    expect(pose.floor_id).toBe(1);
    expect(Math.abs((pose.x as number) - 130)).toBeLessThan(5);
    expect(Math.abs(pose.y as number)).toBeLessThan(5);

    const west = planEvacuation({ floorId: 1, x: 20, y: 0 }, nodes[0]!, targets, { startAt: 0, speedMps: 1.5 }, random)!;
    expect(west.target).toBe('West');
    const circle = west.waypoints.at(-1)!;
    expect(Math.hypot(circle.x + 20, circle.y)).toBeLessThan(5);
  });

  it('plans nothing when no assembly point can be reached', () => {
    const lonely: GraphNode = { id: 9, floorId: 1, x: 0, y: 0, neighbours: [] };
    const targets = musterTargets(fences, corridor());
    expect(planEvacuation({ floorId: 1, x: 0, y: 0 }, lonely, targets, { startAt: 0, speedMps: 1 }, mulberry32(1))).toBeUndefined();
  });
});
