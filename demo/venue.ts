import type { GraphLink, GraphNode } from '../shared/routing/path-graph.js';
/**
 * The demo venue, as plain data: an 80 m x 50 m clinic with two floors, one corridor each (y = 25), rooms above
 * and below it, stairs at the west end and a lift at the east end. The seeder sends it through the API; the
 * floorplan drawing reads the same numbers, so the picture and the geometry agree.
 */
export const DEMO_BUILDING_NAME = 'Floorcast demo clinic';
export const DEMO_WIDTH_M = 80;
export const DEMO_LENGTH_M = 50;
export const DEMO_LOCATION = { lat: 40.4531, lng: -3.6883 };
export const CORRIDOR_Y = 25;

/** Corridor nodes (x), and the rooms each branch leads to: up (y = 40) or down (y = 10). */
export const CORRIDOR_XS = [5, 15, 25, 35, 45, 55, 65, 75] as const;
export const BRANCHES = [
  { x: 15, y: 40 },
  { x: 35, y: 40 },
  { x: 55, y: 40 },
  { x: 25, y: 10 },
  { x: 45, y: 10 },
  { x: 65, y: 10 },
] as const;
/** Room walls across the corridor's north side and south side (x of each partition). */
export const NORTH_PARTITIONS = [25, 45, 65] as const;
export const SOUTH_PARTITIONS = [15, 35, 55] as const;
export const STAIRS_X = 5;
export const LIFT_X = 75;

export interface DemoFloorSpec {
  level: number;
  name: string;
  levelHeight: number;
}
export const DEMO_FLOORS: readonly DemoFloorSpec[] = [
  { level: 0, name: 'Ground floor', levelHeight: 0 },
  { level: 1, name: 'First floor', levelHeight: 4 },
];

/** A rectangle as a closed ring of [x, y] pairs. */
export const rectangle = (x0: number, y0: number, x1: number, y1: number): [number, number][] => [
  [x0, y0],
  [x1, y0],
  [x1, y1],
  [x0, y1],
  [x0, y0],
];

export interface DemoGeofenceSpec {
  floor: number;
  name: string;
  cartesians: [number, number][];
  /** Whether the seeder sets the max-stay time (the demo's value) on it. */
  maxStay: boolean;
}
/** Each geofence is a room with a branch node at its centre, so a device can walk in and stay. */
export const DEMO_GEOFENCES: readonly DemoGeofenceSpec[] = [
  { floor: 0, name: 'Server room', cartesians: rectangle(27, 30, 43, 48), maxStay: true },
  { floor: 0, name: 'Loading bay', cartesians: rectangle(57, 2, 73, 20), maxStay: false },
  { floor: 1, name: 'Pharmacy store', cartesians: rectangle(47, 30, 63, 48), maxStay: true },
  { floor: 1, name: 'Ward A', cartesians: rectangle(17, 2, 33, 20), maxStay: false },
];

/**
 * Where people gather in an evacuation (geofences with `muster_point`), outside the building on the ground floor:
 * a lawn beyond the west door and the car park beyond the main entrance (south). The path graph reaches both.
 */
export interface DemoAssemblyPointSpec {
  name: string;
  type: 'POLYGON' | 'CIRCLE';
  cartesians: [number, number][];
  radius?: number;
}
export const WEST_DOOR = { x: 0, y: CORRIDOR_Y };
export const MAIN_ENTRANCE_X = 40;
export const DEMO_ASSEMBLY_POINTS: readonly DemoAssemblyPointSpec[] = [
  { name: 'West lawn', type: 'CIRCLE', cartesians: [[-12, CORRIDOR_Y]], radius: 6 },
  { name: 'Car park', type: 'POLYGON', cartesians: rectangle(MAIN_ENTRANCE_X - 9, -17, MAIN_ENTRANCE_X + 9, -5) },
];

export const DEMO_EVENT = {
  floor: 0,
  name: 'Welcome desk',
  info: '<h2>Welcome to the clinic</h2><p>Visitors sign in at the <b>welcome desk</b>.</p>',
  x: 15,
  y: CORRIDOR_Y,
  radius: 4,
};

export const DEMO_POIS: readonly { floor: number; name: string; x: number; y: number }[] = [
  { floor: 0, name: 'Main entrance', x: 40, y: 23 },
  { floor: 0, name: 'Defibrillator', x: 65, y: 26 },
  { floor: 0, name: 'Cafeteria', x: 45, y: 10 },
  { floor: 0, name: 'Stairs', x: STAIRS_X, y: CORRIDOR_Y },
  { floor: 0, name: 'Lift', x: LIFT_X, y: CORRIDOR_Y },
  { floor: 1, name: 'First-aid kit', x: 45, y: 26 },
  { floor: 1, name: 'Nurses station', x: 15, y: 40 },
  { floor: 1, name: 'Stairs', x: STAIRS_X, y: CORRIDOR_Y },
  { floor: 1, name: 'Lift', x: LIFT_X, y: CORRIDOR_Y },
];

/** The path graph: per floor the corridor and its branches (ids floor index * 100 + n), then stairs and lift. */
export function demoGraph(floorIds: readonly number[]): { nodes: GraphNode[]; links: GraphLink[] } {
  const nodes: GraphNode[] = [];
  const links: GraphLink[] = [];
  const link = (source: number, target: number, tags: string[] = [], accessible = true) =>
    links.push({ source, target, origin: 'both', accessible, tags });
  floorIds.forEach((floorId, floor) => {
    const base = (floor + 1) * 100;
    CORRIDOR_XS.forEach((x, i) => {
      nodes.push({ id: base + i, floor_id: floorId, x, y: CORRIDOR_Y });
      if (i > 0) link(base + i - 1, base + i);
    });
    BRANCHES.forEach((branch, j) => {
      const id = base + 50 + j;
      nodes.push({ id, floor_id: floorId, x: branch.x, y: branch.y });
      link(base + CORRIDOR_XS.indexOf(branch.x as (typeof CORRIDOR_XS)[number]), id);
    });
  });
  // Out of the ground floor to the assembly points: the west door past the stairs, the main entrance to the car park.
  const base = 100;
  nodes.push({ id: 190, floor_id: floorIds[0]!, x: -12, y: CORRIDOR_Y });
  link(base + CORRIDOR_XS.indexOf(STAIRS_X), 190, ['outdoors']);
  nodes.push({ id: 191, floor_id: floorIds[0]!, x: MAIN_ENTRANCE_X, y: CORRIDOR_Y - 5 });
  link(base + CORRIDOR_XS.indexOf(35), 191);
  link(base + CORRIDOR_XS.indexOf(45), 191);
  nodes.push({ id: 192, floor_id: floorIds[0]!, x: MAIN_ENTRANCE_X, y: -11 });
  link(191, 192, ['outdoors']);
  for (let floor = 1; floor < floorIds.length; floor++) {
    const below = floor * 100;
    const above = (floor + 1) * 100;
    link(below + CORRIDOR_XS.indexOf(STAIRS_X), above + CORRIDOR_XS.indexOf(STAIRS_X), ['stairs'], false);
    link(below + CORRIDOR_XS.indexOf(LIFT_X), above + CORRIDOR_XS.indexOf(LIFT_X), ['elevator']);
  }
  return { nodes, links };
}
