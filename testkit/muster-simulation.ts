/**
 * A seeded evacuation of a building (issue 31), for the mustering tests and bench: people spread over its floors
 * walk at their own speeds (upper floors by the stairs first) out of the nearest door to that door's assembly
 * point, some stay where they are. It yields the poses each tick would upload, with times as offsets from the
 * declaration, and keeps its own figures (when each person first stood in a point, which point, the share
 * accounted over time), so a test can compare what the roll and the report say with what actually happened.
 *
 * Geometry is in the building's metres on the floors' coordinates; floor 0 is the ground floor, where the
 * doors and the assembly points are. No pose lies within `CLEARANCE_M` of a point's edge: inside or outside is
 * never a matter of rounding.
 */

export type SimAssemblyPoint =
  | { kind: 'rect'; name: string; x0: number; y0: number; x1: number; y1: number; door: [number, number] }
  | { kind: 'circle'; name: string; cx: number; cy: number; radius: number; door: [number, number] };

export interface MusterSimOptions {
  seed: number;
  people: number;
  floors: number;
  /** How many stay inside, one per floor in turn (ground first). */
  stayers: number;
  /** The footprint people start in: x in [0, width], y in [0, length]. */
  width: number;
  length: number;
  points: readonly SimAssemblyPoint[];
  /** The stairwell, at the same place on every floor. */
  stairs: [number, number];
  stairSecondsPerFloor: number;
  /** Walking speeds are drawn in [min, max] m/s. */
  speed: { min: number; max: number };
  tickMs: number;
  /** Ticks a person still reports from inside the point after arriving. */
  ticksAfterArrival: number;
  /** Ticks a stayer reports (moving a little) before going quiet. */
  stayerTicks: number;
}

export const DEFAULT_MUSTER_SIM: MusterSimOptions = {
  seed: 31,
  people: 200,
  floors: 3,
  stayers: 3,
  width: 120,
  length: 80,
  points: [
    { kind: 'rect', name: 'Car park A', x0: 140, y0: 0, x1: 150, y1: 10, door: [120, 5] },
    { kind: 'circle', name: 'Lawn B', cx: -20, cy: 40, radius: 6, door: [0, 40] },
  ],
  stairs: [60, 40],
  stairSecondsPerFloor: 6,
  speed: { min: 1.2, max: 2.4 },
  tickMs: 2000,
  ticksAfterArrival: 1,
  stayerTicks: 3,
};

export interface SimPerson {
  device: string;
  user: string;
  floor: number;
  x: number;
  y: number;
  speed: number;
  stays: boolean;
  /** The index of the point the person walks to. */
  target: number;
}

/** A pose a tick uploads: floor index, metres, and the fix time as an offset (ms) from the declaration. */
export interface SimPose {
  device: string;
  user: string;
  floor: number;
  x: number;
  y: number;
  offsetMs: number;
}

export interface SimArrival {
  device: string;
  point: string;
  offsetMs: number;
}

/** What the simulation says the report should say; times in seconds since the declaration. */
export interface SimFigures {
  onRoll: number;
  accounted: number;
  /** Seconds to 50%, 90% and 100% accounted; null when not reached. */
  milestones: Record<50 | 90 | 100, number | null>;
  perPoint: Record<string, { arrivals: number; firstS: number | null; lastS: number | null }>;
  /** The device accounted last, when one alone was. */
  last: string | null;
}

/** The body of `POST /api/v1/geofences` that creates `point` as an assembly point on a building's floor. */
export function assemblyPointBody(point: SimAssemblyPoint, buildingId: number, floorId: number) {
  const shape =
    point.kind === 'circle'
      ? { type: 'CIRCLE', cartesians: [[point.cx, point.cy]], radius: point.radius }
      : {
          type: 'POLYGON',
          cartesians: [
            [point.x0, point.y0],
            [point.x1, point.y0],
            [point.x1, point.y1],
            [point.x0, point.y1],
            [point.x0, point.y0],
          ],
        };
  return { name: point.name, building_id: buildingId, floor_id: floorId, ...shape, muster_point: true };
}

export const CLEARANCE_M = 0.25;

/** mulberry32: a small seeded generator, the same numbers for the same seed on any machine. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const hex = (random: () => number, digits: number) => Array.from({ length: digits }, () => Math.floor(random() * 16).toString(16)).join('');
const uuidOf = (random: () => number) => `${hex(random, 8)}-${hex(random, 4)}-4${hex(random, 3)}-8${hex(random, 3)}-${hex(random, 12)}`;

/** Signed distance from a point's edge: positive inside, negative outside. */
export function insideBy(point: SimAssemblyPoint, x: number, y: number): number {
  if (point.kind === 'circle') return point.radius - Math.hypot(x - point.cx, y - point.cy);
  const inside = Math.min(x - point.x0, point.x1 - x, y - point.y0, point.y1 - y);
  if (inside >= 0) return inside;
  const dx = Math.max(point.x0 - x, 0, x - point.x1);
  const dy = Math.max(point.y0 - y, 0, y - point.y1);
  return -Math.hypot(dx, dy);
}

export const centreOf = (point: SimAssemblyPoint): [number, number] =>
  point.kind === 'circle' ? [point.cx, point.cy] : [(point.x0 + point.x1) / 2, (point.y0 + point.y1) / 2];

interface Leg {
  floor: number;
  from: [number, number];
  to: [number, number];
  seconds: number;
}

export class MusterSimulation {
  readonly people: SimPerson[] = [];
  /** Each walker's (and rescued person's) first pose inside a point. */
  readonly arrivals = new Map<string, SimArrival>();
  /** Each person's last pose uploaded so far. */
  readonly lastPose = new Map<string, SimPose>();
  private readonly random: () => number;

  constructor(readonly options: MusterSimOptions = DEFAULT_MUSTER_SIM) {
    this.random = seededRandom(options.seed);
    const { people, floors, width, length, points } = options;
    for (let index = 0; index < people; index++) {
      const x = 5 + this.random() * (width - 10);
      const y = 5 + this.random() * (length - 10);
      const target = nearestDoor(points, x, y);
      this.people.push({
        device: `sim-${String(index).padStart(4, '0')}`,
        user: uuidOf(this.random),
        floor: Math.floor(this.random() * floors),
        x,
        y,
        speed: options.speed.min + this.random() * (options.speed.max - options.speed.min),
        stays: false,
        target,
      });
    }
    for (let s = 0; s < options.stayers; s++) {
      const floor = s % floors;
      const candidates = this.people.filter((person) => person.floor === floor && !person.stays);
      candidates[Math.floor(this.random() * candidates.length)]!.stays = true;
    }
  }

  get walkers(): SimPerson[] {
    return this.people.filter((person) => !person.stays);
  }

  get stayers(): SimPerson[] {
    return this.people.filter((person) => person.stays);
  }

  /** Everyone where they start, before the declaration (the fix that puts them on the roll). */
  startPoses(offsetMs = -1000): SimPose[] {
    return this.people.map((person) => this.record({ ...at(person), offsetMs }));
  }

  /**
   * The evacuation, tick by tick from the declaration: each tick's poses (walkers until a little after they
   * arrive, stayers for a few ticks, moving a little). Arrivals are recorded as the ticks are drawn.
   */
  *ticks(): Generator<SimPose[]> {
    const walks = new Map(
      this.walkers.map((person) => [person.device, { person, legs: this.legsOf(person, person.floor, person.x, person.y) }]),
    );
    yield* this.walk([...walks.values()], 0, this.options.stayerTicks);
  }

  /**
   * Rescuers bring these people out from where they were last seen, at `speed`, starting at `fromOffsetMs`: their
   * poses tick by tick, their arrivals recorded like the others'.
   */
  *rescue(devices: readonly string[], fromOffsetMs: number, speed: number): Generator<SimPose[]> {
    const walks = devices.map((device) => {
      const person = this.people.find((candidate) => candidate.device === device)!;
      const last = this.lastPose.get(device)!;
      const rescued = { ...person, speed, target: nearestDoor(this.options.points, last.x, last.y) };
      return { person: rescued, legs: this.legsOf(rescued, last.floor, last.x, last.y) };
    });
    yield* this.walk(walks, fromOffsetMs, 0);
  }

  private *walk(walks: { person: SimPerson; legs: Leg[] }[], fromOffsetMs: number, stayerTicks: number): Generator<SimPose[]> {
    const { tickMs, ticksAfterArrival, points } = this.options;
    const arrivedAt = new Map<string, number>();
    for (let tick = 1; ; tick++) {
      const offsetMs = fromOffsetMs + tick * tickMs;
      const poses: SimPose[] = [];
      for (const { person, legs } of walks) {
        const arrived = arrivedAt.get(person.device);
        if (arrived !== undefined && tick > arrived + ticksAfterArrival) continue;
        const place = positionAt(legs, (tick * tickMs) / 1000);
        const point = points[person.target]!;
        const clear = clearOfEdge(point, place, legs);
        poses.push(this.record({ device: person.device, user: person.user, floor: clear.floor, x: clear.x, y: clear.y, offsetMs }));
        if (arrived === undefined && clear.floor === 0 && insideBy(point, clear.x, clear.y) > 0) {
          arrivedAt.set(person.device, tick);
          this.arrivals.set(person.device, { device: person.device, point: point.name, offsetMs });
        }
      }
      if (tick <= stayerTicks)
        for (const person of this.stayers) {
          const jitter = (this.random() - 0.5) * 0.6;
          poses.push(this.record({ ...at(person), x: person.x + jitter, y: person.y + jitter, offsetMs }));
        }
      if (poses.length === 0) return;
      yield poses;
    }
  }

  private record(pose: SimPose): SimPose {
    this.lastPose.set(pose.device, pose);
    return pose;
  }

  /** To the stairs and down (upper floors), then to the door nearest the target point, then to its centre. */
  private legsOf(person: SimPerson, floor: number, x: number, y: number): Leg[] {
    const { stairs, stairSecondsPerFloor, points } = this.options;
    const point = points[person.target]!;
    const legs: Leg[] = [];
    let from: [number, number] = [x, y];
    const go = (onFloor: number, to: [number, number]) => {
      legs.push({ floor: onFloor, from, to, seconds: Math.hypot(to[0] - from[0], to[1] - from[1]) / person.speed });
      from = to;
    };
    if (floor > 0) {
      go(floor, stairs);
      for (let level = floor; level > 0; level--) legs.push({ floor: level, from: stairs, to: stairs, seconds: stairSecondsPerFloor });
    }
    go(0, point.door);
    go(0, centreOf(point));
    return legs;
  }

  /**
   * The simulation's own figures: everyone on the roll (all `people`), accounted when they first stood in a
   * point, or when a warden marked them (`manual`: offsets in ms from the declaration).
   */
  figures(manual: readonly { device: string; offsetMs: number }[] = []): SimFigures {
    const accounted = [
      ...[...this.arrivals.values()].map((arrival) => ({ device: arrival.device, offsetMs: arrival.offsetMs })),
      ...manual.filter((mark) => !this.arrivals.has(mark.device)),
    ].sort((a, b) => a.offsetMs - b.offsetMs);
    const n = this.people.length;
    const reached = (percent: number) => {
      const k = Math.ceil((percent * n) / 100);
      return n > 0 && accounted.length >= k ? accounted[k - 1]!.offsetMs / 1000 : null;
    };
    const perPoint: SimFigures['perPoint'] = {};
    for (const point of this.options.points) {
      const there = [...this.arrivals.values()].filter((arrival) => arrival.point === point.name).map((arrival) => arrival.offsetMs);
      perPoint[point.name] = {
        arrivals: there.length,
        firstS: there.length ? Math.min(...there) / 1000 : null,
        lastS: there.length ? Math.max(...there) / 1000 : null,
      };
    }
    const lastAt = accounted.at(-1)?.offsetMs;
    const atLast = accounted.filter((mark) => mark.offsetMs === lastAt);
    return {
      onRoll: n,
      accounted: accounted.length,
      milestones: { 50: reached(50), 90: reached(90), 100: reached(100) },
      perPoint,
      last: atLast.length === 1 ? atLast[0]!.device : null,
    };
  }
}

const at = (person: SimPerson) => ({ device: person.device, user: person.user, floor: person.floor, x: person.x, y: person.y });

function nearestDoor(points: readonly SimAssemblyPoint[], x: number, y: number): number {
  let best = 0;
  points.forEach((point, index) => {
    const [bx, by] = points[best]!.door;
    if (Math.hypot(point.door[0] - x, point.door[1] - y) < Math.hypot(bx - x, by - y)) best = index;
  });
  return best;
}

function positionAt(legs: readonly Leg[], seconds: number): { floor: number; x: number; y: number; leg: number } {
  let left = seconds;
  for (let index = 0; index < legs.length; index++) {
    const leg = legs[index]!;
    if (left <= leg.seconds) {
      const share = leg.seconds === 0 ? 1 : left / leg.seconds;
      return {
        floor: leg.floor,
        x: leg.from[0] + (leg.to[0] - leg.from[0]) * share,
        y: leg.from[1] + (leg.to[1] - leg.from[1]) * share,
        leg: index,
      };
    }
    left -= leg.seconds;
  }
  const last = legs.at(-1)!;
  return { floor: last.floor, x: last.to[0], y: last.to[1], leg: legs.length - 1 };
}

/**
 * A place on the last leg (door to the point's centre) that lies within CLEARANCE_M of the point's edge is moved
 * along the leg out of that band: inwards if it was inside, back towards the door if it was outside.
 */
function clearOfEdge(point: SimAssemblyPoint, place: { floor: number; x: number; y: number; leg: number }, legs: readonly Leg[]) {
  const depth = insideBy(point, place.x, place.y);
  if (place.floor !== 0 || place.leg !== legs.length - 1 || Math.abs(depth) >= CLEARANCE_M) return place;
  const leg = legs[place.leg]!;
  const length = Math.hypot(leg.to[0] - leg.from[0], leg.to[1] - leg.from[1]);
  const [ux, uy] = [(leg.to[0] - leg.from[0]) / length, (leg.to[1] - leg.from[1]) / length];
  const step = (depth >= 0 ? 1 : -1) * 2 * CLEARANCE_M;
  return { ...place, x: place.x + ux * step, y: place.y + uy * step };
}
