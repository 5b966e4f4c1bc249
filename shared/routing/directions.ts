import type { GraphRoute, PathGraph } from './path-graph.js';

/** Walking speed on a floor, m/s (a typical indoor pace). */
export const WALKING_SPEED_MPS = 1.2;
/** Climbing speeds (metres of height per second) and the wait for a lift, used for `duration_s` only. */
export const STAIRS_VERTICAL_MPS = 0.3;
export const ESCALATOR_VERTICAL_MPS = 0.5;
export const LIFT_VERTICAL_MPS = 1.5;
export const LIFT_WAIT_S = 20;
/** Turns smaller than this many degrees read as "keep walking". */
const STRAIGHT_DEG = 20;

export type FloorChangeKind = 'lift' | 'stairs' | 'escalator' | 'ramp';

export interface RouteLeg {
  floor_id: number;
  distance_m: number;
  points: { x: number; y: number }[];
}

export interface RouteStep {
  instruction: string;
  distance_m: number;
  floor_id: number;
  floor_change?: { from_floor_id: number; to_floor_id: number; direction: 'up' | 'down'; via: FloorChangeKind };
}

export interface RouteDescription {
  legs: RouteLeg[];
  steps: RouteStep[];
  duration_s: number;
}

const round1 = (value: number) => Math.round(value * 10) / 10;

/** A link between floors is a lift, stairs, an escalator or a ramp: its tags say which, else accessible means lift. */
export function floorChangeKind(tags: readonly string[], accessible: boolean): FloorChangeKind {
  const lower = tags.map((tag) => tag.toLowerCase());
  if (lower.some((tag) => tag.includes('elevator') || tag.includes('lift'))) return 'lift';
  if (lower.some((tag) => tag.includes('escalator'))) return 'escalator';
  if (lower.some((tag) => tag.includes('stair'))) return 'stairs';
  if (lower.some((tag) => tag.includes('ramp'))) return 'ramp';
  return accessible ? 'lift' : 'stairs';
}

/** "left", "slightly right", "sharp left", "around", or undefined for (nearly) straight on. */
export function turnOf(fromHeading: number, toHeading: number): string | undefined {
  let degrees = ((toHeading - fromHeading) * 180) / Math.PI;
  while (degrees > 180) degrees -= 360;
  while (degrees <= -180) degrees += 360;
  const magnitude = Math.abs(degrees);
  if (magnitude < STRAIGHT_DEG) return undefined;
  if (magnitude > 160) return 'around';
  // Floor metres: x east, y north, so a counter-clockwise (positive) change of heading is a left turn.
  const side = degrees > 0 ? 'left' : 'right';
  if (magnitude < 60) return `slightly ${side}`;
  if (magnitude > 120) return `sharp ${side}`;
  return side;
}

/**
 * Turns a found route into legs (one per floor visited, in order) and spoken-style steps: walk, turn, change
 * floor, arrive. `floorName` names floors in the floor-change steps.
 */
export function describeRoute(route: GraphRoute, graph: PathGraph, floorName: (floorId: number) => string): RouteDescription {
  const { vertices } = route;
  const legs: RouteLeg[] = [];
  const steps: RouteStep[] = [];
  let duration = 0;
  let leg: RouteLeg | undefined;
  /** The walking step being extended, and the heading it ends on. */
  let walking: RouteStep | undefined;
  let heading: number | undefined;
  for (let index = 0; index < vertices.length; index++) {
    const vertex = vertices[index]!;
    const previous = vertices[index - 1];
    if (!previous || previous.floorId !== vertex.floorId) {
      if (previous) {
        const link = graph.links[vertex.via]!;
        const rise = graph.altitude(vertex.floorId) - graph.altitude(previous.floorId);
        const via = floorChangeKind(link.tags, link.accessible);
        const direction = rise >= 0 ? 'up' : 'down';
        const horizontal = Math.hypot(vertex.x - previous.x, vertex.y - previous.y);
        const verb =
          via === 'lift'
            ? 'Take the lift'
            : via === 'stairs'
              ? 'Take the stairs'
              : via === 'escalator'
                ? 'Take the escalator'
                : 'Take the ramp';
        steps.push({
          instruction: `${verb} ${direction} to ${floorName(vertex.floorId)}`,
          distance_m: round1(horizontal + Math.abs(rise)),
          floor_id: previous.floorId,
          floor_change: { from_floor_id: previous.floorId, to_floor_id: vertex.floorId, direction, via },
        });
        const vertical = Math.abs(rise);
        duration += horizontal / WALKING_SPEED_MPS;
        duration +=
          via === 'lift'
            ? LIFT_WAIT_S + vertical / LIFT_VERTICAL_MPS
            : vertical / (via === 'escalator' ? ESCALATOR_VERTICAL_MPS : via === 'stairs' ? STAIRS_VERTICAL_MPS : WALKING_SPEED_MPS);
        walking = undefined;
        heading = undefined;
      }
      leg = { floor_id: vertex.floorId, distance_m: 0, points: [{ x: vertex.x, y: vertex.y }] };
      legs.push(leg);
      continue;
    }
    const length = Math.hypot(vertex.x - previous.x, vertex.y - previous.y);
    leg!.points.push({ x: vertex.x, y: vertex.y });
    leg!.distance_m += length;
    duration += length / WALKING_SPEED_MPS;
    if (length < 1e-9) continue;
    const segmentHeading = Math.atan2(vertex.y - previous.y, vertex.x - previous.x);
    const turn = heading === undefined ? undefined : turnOf(heading, segmentHeading);
    if (!walking || turn !== undefined) {
      walking = {
        instruction: turn === undefined ? 'Walk' : turn === 'around' ? 'Turn around' : `Turn ${turn}`,
        distance_m: 0,
        floor_id: vertex.floorId,
      };
      steps.push(walking);
    }
    walking.distance_m += length;
    heading = segmentHeading;
  }
  for (const step of steps) {
    if (step.floor_change) continue;
    step.distance_m = round1(step.distance_m);
    const metres = `${Math.round(step.distance_m)} m`;
    step.instruction = step.instruction === 'Walk' ? `Walk ${metres}` : `${step.instruction} and walk ${metres}`;
  }
  for (const each of legs) each.distance_m = round1(each.distance_m);
  const last = vertices[vertices.length - 1];
  steps.push({ instruction: 'Arrive at your destination', distance_m: 0, floor_id: last?.floorId ?? legs[0]?.floor_id ?? 0 });
  return { legs, steps, duration_s: Math.round(duration) };
}
