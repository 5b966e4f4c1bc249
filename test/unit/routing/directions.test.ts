import { describe, expect, it } from 'vitest';
import { describeRoute, floorChangeKind, turnOf, LIFT_WAIT_S, WALKING_SPEED_MPS } from '../../../shared/routing/directions.js';
import { PathGraph, type GraphLink, type GraphNode } from '../../../shared/routing/path-graph.js';

const link = (source: number, target: number, extra: Partial<GraphLink> = {}): GraphLink => ({
  source,
  target,
  origin: 'both',
  accessible: true,
  tags: [],
  ...extra,
});

describe('directions', () => {
  it('names turns from the change of heading (x east, y north: counter-clockwise is left)', () => {
    const east = 0;
    const north = Math.PI / 2;
    expect(turnOf(east, north)).toBe('left');
    expect(turnOf(north, east)).toBe('right');
    expect(turnOf(east, 0.1)).toBeUndefined();
    expect(turnOf(east, Math.PI / 4)).toBe('slightly left');
    expect(turnOf(east, (-3 * Math.PI) / 4)).toBe('sharp right');
    expect(turnOf(east, Math.PI)).toBe('around');
  });

  it('tells lifts from stairs by tags, else by accessibility', () => {
    expect(floorChangeKind(['Elevator A'], false)).toBe('lift');
    expect(floorChangeKind(['stairs'], true)).toBe('stairs');
    expect(floorChangeKind([], true)).toBe('lift');
    expect(floorChangeKind([], false)).toBe('stairs');
  });

  it('describes a walk east, a left turn, a lift up and a walk on the upper floor, with one leg per floor', () => {
    const nodes: GraphNode[] = [
      { id: 1, floor_id: 10, x: 0, y: 0 },
      { id: 2, floor_id: 10, x: 20, y: 0 },
      { id: 3, floor_id: 10, x: 20, y: 15 },
      { id: 4, floor_id: 11, x: 20, y: 15 },
      { id: 5, floor_id: 11, x: 20, y: 30 },
    ];
    const floors = new Map([
      [10, { level: 0, levelHeight: 0 }],
      [11, { level: 1, levelHeight: 4 }],
    ]);
    const graph = new PathGraph(nodes, [link(1, 2), link(2, 3), link(3, 4, { tags: ['lift'] }), link(4, 5)], floors);
    const route = graph.route(graph.snap(10, 0, 0)!, graph.snap(11, 20, 30)!)!;
    const described = describeRoute(route, graph, (id) => (id === 11 ? 'First' : 'Ground'));
    expect(described.steps.map((step) => step.instruction)).toEqual([
      'Walk 20 m',
      'Turn left and walk 15 m',
      'Take the lift up to First',
      'Walk 15 m',
      'Arrive at your destination',
    ]);
    expect(described.steps[2]!.floor_change).toEqual({ from_floor_id: 10, to_floor_id: 11, direction: 'up', via: 'lift' });
    expect(described.legs.map((leg) => [leg.floor_id, leg.distance_m])).toEqual([
      [10, 35],
      [11, 15],
    ]);
    expect(described.duration_s).toBe(Math.round(50 / WALKING_SPEED_MPS + LIFT_WAIT_S + 4 / 1.5));
  });
});
