import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { DemoApi, DemoApiError } from './api-client.js';
import { musterTargets, planEvacuation, stepEvacuee, type Evacuee, type MusterTarget, type Waypoint } from './drill.js';
import { deviceIdentifier } from './seed.js';
import { DEMO_BUILDING_NAME } from './venue.js';

/**
 * Simulated staff for a venue: devices walking its path graph, uploading their positions in one HTTP batch per
 * tick (`POST /api/v1/realtime/positions`), exactly as a tracking app would. It uses the public API only, so it
 * runs against any gateway: `npx tsx demo/simulator.ts --url http://127.0.0.1:8080 --api-key fc_...`.
 *
 * Besides the walkers, a few scripted devices make the control room busy: lingerers stay in the max-stay
 * geofences (GEOFENCE_MAX_STAY_TIME), one device goes silent (DEADMAN, given the building's silence setting)
 * and one presses DANGER. When an evacuation (or a drill) is declared on the building, everyone walks to the
 * nearest assembly point (demo/drill.ts) except a few who stay behind, and walks back in once it has ended.
 */
export interface SimulatorOptions {
  url: string;
  /** A key that may read the building and upload for every device (the seeder's simulator key). */
  apiKey: string;
  /** The building, by id or else by name (default the demo's). */
  buildingId?: number;
  buildingName?: string;
  devices?: number;
  devicePrefix?: string;
  /** One upload of every device per interval (1 Hz by default). */
  intervalMs?: number;
  speedMps?: number;
  /** How many devices stay in the max-stay geofences, and for how long before they walk on. */
  lingerers?: number;
  lingerSeconds?: number;
  /** The silent device stops uploading after this long. */
  silentAfterSeconds?: number;
  /** The DANGER device sets `danger: true` on one pose after this long. */
  dangerAfterSeconds?: number;
  /** Seed of the random walks (the same seed walks the same way). */
  seed?: number;
  /** Whether devices evacuate when the building has an active evacuation (asked every `evacuationPollMs`). */
  followEvacuations?: boolean;
  evacuationPollMs?: number;
  /** How many walkers ignore an evacuation (they stay missing on the roll). */
  stayBehind?: number;
  /** People react within this many seconds of the declaration, each after its own delay. */
  reactionSeconds?: number;
  log?: (line: string) => void;
}

export interface Node {
  id: number;
  floorId: number;
  x: number;
  y: number;
  neighbours: { node: Node; metres: number }[];
  /** Outside the building (on the way to an assembly point): walkers go there only to evacuate. */
  outdoors?: boolean;
}

export type Role = 'walker' | 'lingerer' | 'silent' | 'danger';
export interface Device {
  id: string;
  role: Role;
  from: Node;
  to: Node;
  /** Metres walked along from -> to. */
  along: number;
  /** Lingerers: where they stand, and until when (ms since start). */
  stay?: { node: Node; until: number };
  /** A walker stopped at a node (talking, reading a sign) until then (ms since start), facing `yaw`. */
  pause?: { until: number; yaw: number };
  /** How far to the side of the link's centre line this walker keeps (metres), and its sway's phase. */
  lane: number;
  phase: number;
  dangerSent?: boolean;
  /** Ignores evacuations (stays behind, missing on the roll). */
  staysBehind?: boolean;
  /** On the way out to (or standing in) an assembly point, during an evacuation. */
  evacuee?: Evacuee & { node: Node };
  /** Where its last pose put it. */
  last?: Waypoint;
}

export interface SimulatorStats {
  ticks: number;
  posesSent: number;
  failedUploads: number;
  lastError?: string;
}

/** Time a floor change takes, in metres of walking (a link between floors joins two points above each other). */
const FLOOR_CHANGE_METRES = 8;
/**
 * People do not walk the path graph's exact lines: each keeps to one side (at most this far, within every door
 * of the demo venue, which are 2 m wide) and sways; at a node a walker may stop a while and look about, and
 * sometimes turns back the way it came.
 */
const LANE_MAX_M = 0.8;
const SWAY_M = 0.25;
const PAUSE_CHANCE = 0.3;
const PAUSE_MIN_S = 2;
const PAUSE_MAX_S = 15;
const TURN_BACK_CHANCE = 0.15;

export class Simulator {
  readonly stats: SimulatorStats = { ticks: 0, posesSent: 0, failedUploads: 0 };
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;
  private startedAt = 0;
  private readonly random: () => number;
  /** The building's active evacuation the devices are following (null: none). */
  private evacuation: string | null = null;

  private constructor(
    private readonly api: DemoApi,
    readonly buildingId: number,
    private readonly devices: Device[],
    private readonly targets: readonly MusterTarget[],
    private readonly options: Required<Omit<SimulatorOptions, 'url' | 'apiKey' | 'buildingId' | 'buildingName' | 'log'>> & {
      log: (line: string) => void;
    },
    random: () => number,
  ) {
    this.random = random;
  }

  /** Reads the building, its path graph and geofences through the API and places the devices. */
  static async connect(input: SimulatorOptions): Promise<Simulator> {
    const options = {
      devices: 50,
      devicePrefix: 'demo',
      intervalMs: 1000,
      speedMps: 1.3,
      lingerers: 3,
      lingerSeconds: 180,
      silentAfterSeconds: 10,
      dangerAfterSeconds: 15,
      seed: 17,
      followEvacuations: true,
      evacuationPollMs: 2000,
      stayBehind: 3,
      reactionSeconds: 8,
      log: () => {},
      ...stripUndefined(input),
    };
    const api = new DemoApi(input.url, { apiKey: input.apiKey });
    let buildingId = input.buildingId;
    if (buildingId === undefined) {
      const name = input.buildingName ?? DEMO_BUILDING_NAME;
      const found = (await api.get<any[]>('/api/v1/buildings')).find((b) => b.name === name);
      if (!found) throw new Error(`no building named "${name}" (seed it with npm run demo, or pass --building)`);
      buildingId = found.id as number;
    }
    const building = await api.get<any>(`/api/v1/buildings/${buildingId}`);
    const graph = await api.get<{ nodes: any[]; links: any[] }>(`/api/v1/buildings/${buildingId}/paths`);
    const nodes = new Map<number, Node>(graph.nodes.map((n) => [n.id, { id: n.id, floorId: n.floor_id, x: n.x, y: n.y, neighbours: [] }]));
    for (const link of graph.links) {
      const a = nodes.get(link.source);
      const b = nodes.get(link.target);
      if (!a || !b) continue;
      const metres = a.floorId === b.floorId ? Math.max(Math.hypot(a.x - b.x, a.y - b.y), 0.1) : FLOOR_CHANGE_METRES;
      if (link.origin !== 'target') a.neighbours.push({ node: b, metres });
      if (link.origin !== 'source') b.neighbours.push({ node: a, metres });
    }
    // Nodes outside the footprint lead to the assembly points: nobody wanders out there.
    const { width, length } = building.dimensions ?? { width: Number.POSITIVE_INFINITY, length: Number.POSITIVE_INFINITY };
    for (const node of nodes.values()) node.outdoors = node.x < 0 || node.y < 0 || node.x > width || node.y > length;
    const linked = [...nodes.values()].filter((n) => !n.outdoors && n.neighbours.some((next) => !next.node.outdoors));
    const targets = musterTargets(building.geofences ?? [], [...nodes.values()]);
    if (linked.length === 0) throw new Error(`building ${buildingId} has no path graph to walk`);
    const random = mulberry32(options.seed);
    // Where lingerers stand: a graph node inside each geofence that has a max-stay time.
    const stays = (building.geofences ?? [])
      .filter((g: any) => g.max_stay_time && !g.deleted && g.type === 'POLYGON')
      .map((g: any) => linked.find((n) => n.floorId === g.floor_id && insidePolygon(n.x, n.y, g.cartesians)))
      .filter((n: Node | undefined): n is Node => n !== undefined);

    const count = options.devices;
    const devices: Device[] = [];
    for (let i = 0; i < count; i++) {
      const from = linked[Math.floor(random() * linked.length)]!;
      const edge = from.neighbours[Math.floor(random() * from.neighbours.length)]!;
      // Scripted roles take the last devices, so the first ones (the responders') always walk.
      const fromEnd = count - 1 - i;
      const role: Role =
        fromEnd < options.lingerers && stays.length > 0
          ? 'lingerer'
          : fromEnd === options.lingerers
            ? 'silent'
            : fromEnd === options.lingerers + 1
              ? 'danger'
              : 'walker';
      const device: Device = {
        id: deviceIdentifier(options.devicePrefix, i),
        role,
        // The walkers just before the scripted roles stay behind in an evacuation.
        staysBehind: role === 'walker' && fromEnd >= options.lingerers + 2 && fromEnd < options.lingerers + 2 + options.stayBehind,
        from,
        to: edge.node,
        along: random() * edge.metres,
        lane: (random() - 0.5) * 2 * LANE_MAX_M,
        phase: random() * Math.PI * 2,
      };
      if (role === 'lingerer') {
        const node = stays[fromEnd % stays.length]!;
        device.stay = { node, until: options.lingerSeconds * 1000 };
        device.from = node;
        device.to = node.neighbours[0]!.node;
        device.along = 0;
      }
      devices.push(device);
    }
    options.log(
      `simulating ${count} devices in building ${buildingId} "${building.name}" (${stays.length} max-stay geofences, ${targets.length} assembly points)`,
    );
    return new Simulator(api, buildingId, devices, targets, options, random);
  }

  start(): void {
    this.startedAt = Date.now();
    const loop = async () => {
      if (this.stopped) return;
      const began = Date.now();
      this.running = this.tick(began - this.startedAt);
      await this.running;
      if (!this.stopped) this.timer = setTimeout(loop, Math.max(0, this.options.intervalMs - (Date.now() - began)));
    };
    void loop();
  }

  /** Stops ticking and waits for an upload under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One step of every device and one batch upload. */
  private async tick(elapsedMs: number): Promise<void> {
    const dt = this.stats.ticks === 0 ? 0 : this.options.intervalMs / 1000;
    await this.followEvacuation(elapsedMs);
    const now = Date.now();
    const poses: Record<string, unknown>[] = [];
    for (const device of this.devices) {
      if (device.role === 'silent' && elapsedMs >= this.options.silentAfterSeconds * 1000) continue;
      const pose = device.evacuee ? stepEvacuee(device.evacuee, dt, elapsedMs, this.random) : this.step(device, dt, elapsedMs);
      device.last = { floorId: pose.floor_id as number, x: pose.x as number, y: pose.y as number };
      if (device.role === 'danger' && !device.dangerSent && elapsedMs >= this.options.dangerAfterSeconds * 1000) {
        pose.danger = true;
        device.dangerSent = true;
        this.options.log(`${device.id} pressed DANGER`);
      }
      poses.push({ device_id: device.id, timestamp: now, building_id: this.buildingId, ...pose });
    }
    this.stats.ticks++;
    try {
      await this.api.post('/api/v1/realtime/positions', { poses });
      this.stats.posesSent += poses.length;
    } catch (error) {
      this.stats.failedUploads++;
      this.stats.lastError = error instanceof Error ? error.message : String(error);
      this.options.log(`upload failed: ${this.stats.lastError}`);
    }
  }

  /**
   * Asks now and then whether the building has an active evacuation: a new one sends everyone but those who stay
   * behind to the nearest assembly point, each after a moment to react and at their own pace; its end brings them
   * back in.
   */
  private async followEvacuation(elapsedMs: number): Promise<void> {
    const every = Math.max(1, Math.round(this.options.evacuationPollMs / this.options.intervalMs));
    if (!this.options.followEvacuations || this.targets.length === 0 || this.stats.ticks % every !== 0) return;
    let active: string | null;
    try {
      active = (await this.api.get<{ id: string }>(`/api/v1/buildings/${this.buildingId}/evacuations/current`)).id;
    } catch (error) {
      if (!(error instanceof DemoApiError && error.status === 404)) return this.options.log(`evacuation not read: ${String(error)}`);
      active = null;
    }
    if (active === this.evacuation) return;
    if (this.evacuation !== null) this.walkBackIn();
    this.evacuation = active;
    if (active !== null) this.evacuate(elapsedMs);
  }

  private evacuate(elapsedMs: number): void {
    const { reactionSeconds, speedMps } = this.options;
    let walking = 0;
    for (const device of this.devices) {
      if (device.staysBehind) continue;
      const here = device.last ?? { floorId: device.from.floorId, x: device.from.x, y: device.from.y };
      const plan = planEvacuation(
        here,
        device.to,
        this.targets,
        { startAt: elapsedMs + this.random() * reactionSeconds * 1000, speedMps: speedMps * (1 + this.random() * 0.6) },
        this.random,
      );
      if (!plan) continue;
      device.stay = device.pause = undefined;
      device.evacuee = { ...plan, node: this.targets.find((target) => target.name === plan.target)!.node as Node };
      walking++;
    }
    const behind = this.devices.filter((device) => device.staysBehind).map((device) => device.id);
    this.options.log(
      `evacuation ${this.evacuation}: ${walking} walking to ${this.targets.map((t) => t.name).join(' and ')}; staying behind: ${behind.join(', ') || 'nobody'}`,
    );
  }

  /** The evacuation ended: everyone walks back in from the assembly point's node. */
  private walkBackIn(): void {
    for (const device of this.devices) {
      const evacuee = device.evacuee;
      if (!evacuee) continue;
      device.evacuee = undefined;
      const inward = evacuee.node.neighbours.find((next) => !next.node.outdoors) ?? evacuee.node.neighbours[0]!;
      device.from = evacuee.node;
      device.to = inward.node;
      device.along = 0;
    }
    this.options.log(`evacuation ${this.evacuation} ended: walking back in`);
  }

  /** Moves one device by dt seconds and answers its pose (floor, x, y, yaw, accuracy). */
  private step(device: Device, dt: number, elapsedMs: number): Record<string, unknown> {
    return stepDevice(device, dt, elapsedMs, this.options.speedMps, this.random);
  }
}

/**
 * One step of a device (exported for its unit test): a lingerer stands in its geofence until its time is up; a
 * walker follows the path graph at about `speedMps`, to one side of its lines and swaying, and at a node may stop
 * a while or turn back.
 */
export function stepDevice(device: Device, dt: number, elapsedMs: number, speedMps: number, random: () => number): Record<string, unknown> {
  if (device.stay && elapsedMs < device.stay.until) {
    const { node } = device.stay;
    return { floor_id: node.floorId, x: round(node.x + (random() - 0.5)), y: round(node.y + (random() - 0.5)), yaw: 0, accuracy: 1.5 };
  }
  device.stay = undefined;
  if (device.pause && elapsedMs < device.pause.until) {
    // Standing: small shifts of weight, and now and then a look around.
    if (random() < 0.2) device.pause.yaw = round(device.pause.yaw + (random() - 0.5) * Math.PI);
    const { from } = device;
    return {
      floor_id: from.floorId,
      x: round(from.x + (random() - 0.5) * 0.3),
      y: round(from.y + (random() - 0.5) * 0.3),
      yaw: device.pause.yaw,
      accuracy: round(1 + random() * 2),
    };
  }
  device.pause = undefined;
  let left = speedMps * dt * (0.8 + random() * 0.4);
  for (;;) {
    const metres = device.from.neighbours.find((n) => n.node === device.to)?.metres ?? 1;
    if (device.along + left < metres) {
      device.along += left;
      break;
    }
    left -= metres - device.along;
    // At a node: on, avoiding the way back unless it is a dead end or the walker turns back.
    const indoors = device.to.neighbours.filter((n) => !n.node.outdoors);
    const onward = indoors.filter((n) => n.node !== device.from);
    const choices = onward.length > 0 && random() >= TURN_BACK_CHANCE ? onward : indoors.length > 0 ? indoors : device.to.neighbours;
    const cameFrom = device.from;
    device.from = device.to;
    device.to = choices[Math.floor(random() * choices.length)]!.node;
    device.along = 0;
    device.lane = (random() - 0.5) * 2 * LANE_MAX_M;
    if (random() < PAUSE_CHANCE) {
      const seconds = PAUSE_MIN_S + random() * (PAUSE_MAX_S - PAUSE_MIN_S);
      device.pause = { until: elapsedMs + seconds * 1000, yaw: round(Math.atan2(device.from.y - cameFrom.y, device.from.x - cameFrom.x)) };
      break;
    }
  }
  const { from, to } = device;
  const metres = from.neighbours.find((n) => n.node === to)?.metres ?? 1;
  const f = Math.min(device.along / metres, 1);
  // Between floors the device is on the floor it left until half way.
  const floorId = from.floorId === to.floorId || f < 0.5 ? from.floorId : to.floorId;
  // Off the centre line by the walker's lane and sway, easing to nothing at the nodes (so never through a wall).
  const side = from.floorId === to.floorId ? (device.lane + SWAY_M * Math.sin(device.along / 2 + device.phase)) * Math.sin(Math.PI * f) : 0;
  const heading = Math.atan2(to.y - from.y, to.x - from.x);
  return {
    floor_id: floorId,
    x: round(from.x + (to.x - from.x) * f - Math.sin(heading) * side),
    y: round(from.y + (to.y - from.y) * f + Math.cos(heading) * side),
    yaw: round(heading),
    accuracy: round(1 + random() * 2),
  };
}

const round = (value: number) => Math.round(value * 100) / 100;

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** A small seeded generator, so a run can be repeated. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function insidePolygon(x: number, y: number, ring: [number, number][]): boolean {
  let inside = false;
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
    const [xi, yi] = ring[i]!;
    const [xj, yj] = ring[j]!;
    if (yi > y !== yj > y && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) inside = !inside;
  }
  return inside;
}

/** CLI: `npx tsx demo/simulator.ts --url http://127.0.0.1:8080 --api-key fc_... [--building 1] [--devices 50]`. */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      url: { type: 'string', default: 'http://127.0.0.1:8080' },
      'api-key': { type: 'string', default: process.env.FLOORCAST_API_KEY },
      building: { type: 'string' },
      devices: { type: 'string' },
      'interval-ms': { type: 'string' },
      seed: { type: 'string' },
    },
  });
  if (!values['api-key']) {
    process.stderr.write(
      'usage: npx tsx demo/simulator.ts --url http://127.0.0.1:8080 --api-key fc_... [--building ID] [--devices 50] [--interval-ms 1000]\n',
    );
    process.exit(2);
  }
  const number = (value: string | undefined) => (value === undefined ? undefined : Number(value));
  const simulator = await Simulator.connect({
    url: values.url!,
    apiKey: values['api-key'],
    buildingId: number(values.building),
    devices: number(values.devices),
    intervalMs: number(values['interval-ms']),
    seed: number(values.seed),
    log: (line) => process.stdout.write(`${line}\n`),
  });
  simulator.start();
  const stop = () => void simulator.stop().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error) => {
    process.stderr.write(`simulator failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
