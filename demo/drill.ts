/**
 * How the demo's simulated people evacuate when a drill (or an evacuation) is declared on their building: each
 * reacts after a few seconds, walks the path graph at its own pace to the assembly point nearest by walking
 * distance, and waits there; a few stay behind. Pure functions over the simulator's nodes, with a seeded random,
 * so a unit test can walk them.
 */

/** A node of the path graph as the simulator holds it (`neighbours`: every link, outdoors included). */
export interface GraphNode {
  id: number;
  floorId: number;
  x: number;
  y: number;
  neighbours: { node: GraphNode; metres: number }[];
}

/** An assembly point as the building's detail lists it (a geofence with `muster_point`). */
export interface AssemblyGeofence {
  id: string;
  name: string;
  floor_id: number;
  type: string;
  cartesians: [number, number][];
  radius: number | null;
  muster_point?: boolean;
}

export interface MusterTarget {
  name: string;
  floorId: number;
  /** The graph node nearest the point's centre: where walking on the graph ends. */
  node: GraphNode;
  /** A place to stand inside the point. */
  spot: (random: () => number) => { x: number; y: number };
}

export interface Waypoint {
  floorId: number;
  x: number;
  y: number;
}

export interface Evacuee {
  /** Walks from here, in order; the last is the spot in the assembly point. */
  waypoints: Waypoint[];
  /** Metres walked along waypoints[index] -> waypoints[index + 1]. */
  index: number;
  along: number;
  /** When it starts walking (ms since the simulator started): people take a moment to react. */
  startAt: number;
  speedMps: number;
  target: string;
}

/** Metres a floor change takes (as the simulator's walkers). */
const FLOOR_CHANGE_METRES = 8;

/** The building's assembly points that the graph reaches, each with the node walking ends at. */
export function musterTargets(geofences: readonly AssemblyGeofence[], nodes: readonly GraphNode[]): MusterTarget[] {
  const targets: MusterTarget[] = [];
  for (const fence of geofences) {
    if (!fence.muster_point || (fence.type !== 'CIRCLE' && fence.type !== 'POLYGON')) continue;
    const xs = fence.cartesians.map(([x]) => x);
    const ys = fence.cartesians.map(([, y]) => y);
    const [cx, cy] =
      fence.type === 'CIRCLE' ? fence.cartesians[0]! : [(Math.min(...xs) + Math.max(...xs)) / 2, (Math.min(...ys) + Math.max(...ys)) / 2];
    const onFloor = nodes.filter((node) => node.floorId === fence.floor_id && node.neighbours.length > 0);
    const node = onFloor.sort((a, b) => Math.hypot(a.x - cx, a.y - cy) - Math.hypot(b.x - cx, b.y - cy))[0];
    if (!node) continue;
    // Somewhere well inside: half the radius, or the middle third of the shape's box.
    const spread =
      fence.type === 'CIRCLE'
        ? [(fence.radius ?? 0) * 0.5, (fence.radius ?? 0) * 0.5]
        : [(Math.max(...xs) - Math.min(...xs)) / 3, (Math.max(...ys) - Math.min(...ys)) / 3];
    targets.push({
      name: fence.name,
      floorId: fence.floor_id,
      node,
      spot: (random) => ({ x: round(cx + (random() - 0.5) * spread[0]!), y: round(cy + (random() - 0.5) * spread[1]!) }),
    });
  }
  return targets;
}

/** Walking distance from `start` to every node it reaches, and the way back (Dijkstra; the graphs are small). */
function distancesFrom(start: GraphNode): { distance: Map<GraphNode, number>; previous: Map<GraphNode, GraphNode> } {
  const distance = new Map<GraphNode, number>([[start, 0]]);
  const previous = new Map<GraphNode, GraphNode>();
  const open = new Set<GraphNode>([start]);
  while (open.size > 0) {
    let nearest: GraphNode | undefined;
    for (const node of open) if (!nearest || distance.get(node)! < distance.get(nearest)!) nearest = node;
    open.delete(nearest!);
    for (const { node, metres } of nearest!.neighbours) {
      const through = distance.get(nearest!)! + metres;
      if (through < (distance.get(node) ?? Number.POSITIVE_INFINITY)) {
        distance.set(node, through);
        previous.set(node, nearest!);
        open.add(node);
      }
    }
  }
  return { distance, previous };
}

/**
 * The way out for someone standing at `here`, heading to `next`: along the graph to the assembly point nearest by
 * walking distance, then to a spot inside it. Undefined when no assembly point can be reached.
 */
export function planEvacuation(
  here: Waypoint,
  next: GraphNode,
  targets: readonly MusterTarget[],
  options: { startAt: number; speedMps: number },
  random: () => number,
): Evacuee | undefined {
  const { distance, previous } = distancesFrom(next);
  const reachable = targets.filter((target) => distance.has(target.node));
  if (reachable.length === 0) return undefined;
  const target = reachable.sort((a, b) => distance.get(a.node)! - distance.get(b.node)!)[0]!;
  const path: GraphNode[] = [];
  for (let node: GraphNode | undefined = target.node; node; node = previous.get(node)) path.unshift(node);
  const spot = target.spot(random);
  return {
    waypoints: [here, ...path.map((node) => ({ floorId: node.floorId, x: node.x, y: node.y })), { floorId: target.floorId, ...spot }],
    index: 0,
    along: 0,
    startAt: options.startAt,
    speedMps: options.speedMps,
    target: target.name,
  };
}

const legMetres = (a: Waypoint, b: Waypoint) => (a.floorId === b.floorId ? Math.hypot(b.x - a.x, b.y - a.y) : FLOOR_CHANGE_METRES);

/** Whether the evacuee stands in its assembly point. */
export const arrived = (evacuee: Evacuee) => evacuee.index >= evacuee.waypoints.length - 1;

/**
 * One step of dt seconds along the way out (nothing before startAt); at the end, standing in the point and shifting
 * a little. Answers the pose (floor, x, y, yaw, accuracy).
 */
export function stepEvacuee(evacuee: Evacuee, dt: number, elapsedMs: number, random: () => number): Record<string, unknown> {
  const { waypoints } = evacuee;
  if (elapsedMs >= evacuee.startAt) {
    let left = evacuee.speedMps * dt * (0.9 + random() * 0.2);
    while (!arrived(evacuee)) {
      const metres = legMetres(waypoints[evacuee.index]!, waypoints[evacuee.index + 1]!);
      if (evacuee.along + left < metres) {
        evacuee.along += left;
        break;
      }
      left -= metres - evacuee.along;
      evacuee.index++;
      evacuee.along = 0;
    }
  }
  if (arrived(evacuee)) {
    const spot = waypoints.at(-1)!;
    return { floor_id: spot.floorId, x: round(spot.x + (random() - 0.5)), y: round(spot.y + (random() - 0.5)), yaw: 0, accuracy: 2 };
  }
  const from = waypoints[evacuee.index]!;
  const to = waypoints[evacuee.index + 1]!;
  const f = Math.min(evacuee.along / Math.max(legMetres(from, to), 0.1), 1);
  const floorId = from.floorId === to.floorId || f < 0.5 ? from.floorId : to.floorId;
  return {
    floor_id: floorId,
    x: round(from.x + (to.x - from.x) * f),
    y: round(from.y + (to.y - from.y) * f),
    yaw: round(Math.atan2(to.y - from.y, to.x - from.x)),
    accuracy: round(1 + random() * 2),
  };
}

const round = (value: number) => Math.round(value * 100) / 100;
