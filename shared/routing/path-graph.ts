import RBush from 'rbush';
import { MinHeap } from './min-heap.js';

/** A node of a building's navigation graph, as stored (floor metres). */
export interface GraphNode {
  id: number;
  floor_id: number;
  x: number;
  y: number;
}

/** A link as stored: one-way from `source` or from `target`, or `both`; `accessible` for reduced mobility. */
export interface GraphLink {
  source: number;
  target: number;
  origin: 'source' | 'target' | 'both';
  accessible: boolean;
  tags: readonly string[];
}

export interface GraphFloor {
  level: number;
  /** Metres above ground (the spec's `level_height`; 0 when not set). */
  levelHeight: number;
}

/** Storey height assumed for a floor above or below ground whose `level_height` was left at 0. */
export const DEFAULT_STOREY_M = 3.5;

/** A floor's altitude in metres: its `level_height`, or its level times a storey when that was not set. */
export const altitudeOf = (floor: GraphFloor): number =>
  floor.levelHeight !== 0 || floor.level === 0 ? floor.levelHeight : floor.level * DEFAULT_STOREY_M;

/** A point put on the nearest usable link of its floor: the link, where along it (0 at source, 1 at target). */
export interface Snap {
  link: number;
  t: number;
  floorId: number;
  x: number;
  y: number;
  /** From the requested point to the snapped one, in metres. */
  distance: number;
}

/** Which links a search may walk. */
export interface SearchOptions {
  /** Only accessible links (lifts and ramps, no stairs). */
  accessibleOnly?: boolean;
  /** Link indices to avoid (e.g. those crossing a geofence). */
  blocked?: ReadonlySet<number>;
}

/** A vertex of a found route: a graph node, or one of the two snapped ends (`node` -1). */
export interface RouteVertex {
  node: number;
  floorId: number;
  x: number;
  y: number;
  /** The link walked to reach this vertex from the previous one (-1 for the start). */
  via: number;
}

export interface GraphRoute {
  /** Metres along the links, from the snapped start to the snapped end. */
  distance: number;
  vertices: RouteVertex[];
}

interface SegmentItem {
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
  link: number;
}

const NO_LINK = -1;

/**
 * A building's navigation graph, built once from its stored nodes and links and shared by every request:
 * nodes and links in typed arrays, adjacency in compressed rows (outgoing for A*, incoming for the reverse
 * search that ranks devices), and one rbush of link segments per floor for snapping points to links.
 *
 * Costs are metres: a link on one floor costs its length; a link between floors costs its horizontal length
 * plus the difference of the floors' altitudes, so the straight 3D distance never overestimates and A* with
 * it as heuristic returns shortest routes.
 */
export class PathGraph {
  readonly nodeCount: number;
  readonly linkCount: number;
  readonly nodeIds: readonly number[];
  readonly nodeFloors: Float64Array;
  readonly nx: Float64Array;
  readonly ny: Float64Array;
  readonly nz: Float64Array;
  readonly links: readonly GraphLink[];
  /** Node index of each link's source and target. */
  readonly linkA: Int32Array;
  readonly linkB: Int32Array;
  readonly linkCost: Float64Array;
  /** Horizontal length of each link (its cost on one floor). */
  readonly linkLength: Float64Array;
  private readonly forward: Uint8Array;
  private readonly backward: Uint8Array;
  private readonly accessible: Uint8Array;
  private readonly outStart: Int32Array;
  private readonly outLink: Int32Array;
  private readonly inStart: Int32Array;
  private readonly inLink: Int32Array;
  private readonly floorSegments = new Map<number, { tree: RBush<SegmentItem>; minX: number; minY: number; maxX: number; maxY: number }>();
  private readonly floorAltitude = new Map<number, number>();
  private readonly indexOf = new Map<number, number>();
  private scratch?: {
    cost: Float64Array;
    previous: Int32Array;
    via: Int32Array;
    seen: Uint32Array;
    closed: Uint32Array;
    generation: number;
    heap: MinHeap;
  };

  constructor(nodes: readonly GraphNode[], links: readonly GraphLink[], floors: ReadonlyMap<number, GraphFloor>) {
    for (const [id, floor] of floors) this.floorAltitude.set(id, altitudeOf(floor));
    const kept = nodes.filter((node) => floors.has(node.floor_id));
    this.nodeCount = kept.length;
    this.nodeIds = kept.map((node) => node.id);
    this.nodeFloors = new Float64Array(kept.length);
    this.nx = new Float64Array(kept.length);
    this.ny = new Float64Array(kept.length);
    this.nz = new Float64Array(kept.length);
    kept.forEach((node, index) => {
      this.indexOf.set(node.id, index);
      this.nodeFloors[index] = node.floor_id;
      this.nx[index] = node.x;
      this.ny[index] = node.y;
      this.nz[index] = this.floorAltitude.get(node.floor_id)!;
    });
    const usable = links.filter((link) => this.indexOf.has(link.source) && this.indexOf.has(link.target) && link.source !== link.target);
    this.links = usable;
    this.linkCount = usable.length;
    this.linkA = new Int32Array(usable.length);
    this.linkB = new Int32Array(usable.length);
    this.linkCost = new Float64Array(usable.length);
    this.linkLength = new Float64Array(usable.length);
    this.forward = new Uint8Array(usable.length);
    this.backward = new Uint8Array(usable.length);
    this.accessible = new Uint8Array(usable.length);
    const outDegree = new Int32Array(kept.length + 1);
    const inDegree = new Int32Array(kept.length + 1);
    const segments = new Map<number, SegmentItem[]>();
    usable.forEach((link, l) => {
      const a = this.indexOf.get(link.source)!;
      const b = this.indexOf.get(link.target)!;
      this.linkA[l] = a;
      this.linkB[l] = b;
      const length = Math.hypot(this.nx[b]! - this.nx[a]!, this.ny[b]! - this.ny[a]!);
      this.linkLength[l] = length;
      this.linkCost[l] = length + Math.abs(this.nz[b]! - this.nz[a]!);
      this.forward[l] = link.origin === 'target' ? 0 : 1;
      this.backward[l] = link.origin === 'source' ? 0 : 1;
      this.accessible[l] = link.accessible ? 1 : 0;
      if (this.forward[l]) outDegree[a + 1]!++, inDegree[b + 1]!++;
      if (this.backward[l]) outDegree[b + 1]!++, inDegree[a + 1]!++;
      // Only links within one floor can hold a snapped point.
      if (this.nodeFloors[a] === this.nodeFloors[b]) {
        const floorId = this.nodeFloors[a]!;
        let list = segments.get(floorId);
        if (!list) segments.set(floorId, (list = []));
        list.push({
          minX: Math.min(this.nx[a]!, this.nx[b]!),
          minY: Math.min(this.ny[a]!, this.ny[b]!),
          maxX: Math.max(this.nx[a]!, this.nx[b]!),
          maxY: Math.max(this.ny[a]!, this.ny[b]!),
          link: l,
        });
      }
    });
    for (let i = 0; i < kept.length; i++) {
      outDegree[i + 1]! += outDegree[i]!;
      inDegree[i + 1]! += inDegree[i]!;
    }
    this.outStart = outDegree;
    this.inStart = inDegree;
    this.outLink = new Int32Array(outDegree[kept.length]!);
    this.inLink = new Int32Array(inDegree[kept.length]!);
    const outFill = outDegree.slice(0, kept.length);
    const inFill = inDegree.slice(0, kept.length);
    for (let l = 0; l < usable.length; l++) {
      const a = this.linkA[l]!;
      const b = this.linkB[l]!;
      if (this.forward[l]) {
        this.outLink[outFill[a]!++] = l;
        this.inLink[inFill[b]!++] = l;
      }
      if (this.backward[l]) {
        this.outLink[outFill[b]!++] = l;
        this.inLink[inFill[a]!++] = l;
      }
    }
    for (const [floorId, items] of segments) {
      const tree = new RBush<SegmentItem>();
      tree.load(items);
      let [minX, minY, maxX, maxY] = [Infinity, Infinity, -Infinity, -Infinity];
      for (const item of items) {
        minX = Math.min(minX, item.minX);
        minY = Math.min(minY, item.minY);
        maxX = Math.max(maxX, item.maxX);
        maxY = Math.max(maxY, item.maxY);
      }
      this.floorSegments.set(floorId, { tree, minX, minY, maxX, maxY });
    }
  }

  hasFloor(floorId: number): boolean {
    return this.floorAltitude.has(floorId);
  }

  altitude(floorId: number): number {
    return this.floorAltitude.get(floorId) ?? 0;
  }

  /** Whether a search with these options may walk link `l` (in at least one direction). */
  usable(l: number, options: SearchOptions): boolean {
    if (options.accessibleOnly && !this.accessible[l]) return false;
    return !options.blocked?.has(l);
  }

  /** The node index of the far end of link `l` walked from node `from`. */
  private other(l: number, from: number): number {
    return this.linkA[l] === from ? this.linkB[l]! : this.linkA[l]!;
  }

  /** Links of one floor whose bounding box meets the given box (for blocking links crossing a geofence). */
  linksNear(floorId: number, box: { minX: number; minY: number; maxX: number; maxY: number }): number[] {
    return (
      this.floorSegments
        .get(floorId)
        ?.tree.search(box)
        .map((item) => item.link) ?? []
    );
  }

  /**
   * Puts a point on the nearest usable link of its floor; undefined when the floor has none. The search box
   * doubles until the best candidate is nearer than the box's half-side, so the answer is the true nearest.
   */
  snap(floorId: number, x: number, y: number, options: SearchOptions = {}): Snap | undefined {
    const floor = this.floorSegments.get(floorId);
    if (!floor) return undefined;
    // Farther than this, every segment of the floor is inside the box.
    const reach = Math.hypot(
      Math.max(Math.abs(x - floor.minX), Math.abs(x - floor.maxX)),
      Math.max(Math.abs(y - floor.minY), Math.abs(y - floor.maxY)),
    );
    for (let radius = 1; ; radius *= 2) {
      let best: Snap | undefined;
      for (const item of floor.tree.search({ minX: x - radius, minY: y - radius, maxX: x + radius, maxY: y + radius })) {
        if (!this.usable(item.link, options)) continue;
        const candidate = this.project(item.link, floorId, x, y);
        if (!best || candidate.distance < best.distance) best = candidate;
      }
      if ((best && best.distance <= radius) || radius >= reach) return best;
    }
  }

  private project(l: number, floorId: number, x: number, y: number): Snap {
    const a = this.linkA[l]!;
    const b = this.linkB[l]!;
    const ax = this.nx[a]!;
    const ay = this.ny[a]!;
    const dx = this.nx[b]! - ax;
    const dy = this.ny[b]! - ay;
    const squared = dx * dx + dy * dy;
    const t = squared === 0 ? 0 : Math.min(1, Math.max(0, ((x - ax) * dx + (y - ay) * dy) / squared));
    const px = ax + t * dx;
    const py = ay + t * dy;
    return { link: l, t, floorId, x: px, y: py, distance: Math.hypot(x - px, y - py) };
  }

  /** Cost of walking along the snapped link from `from` to `to` directly (both on that link), or Infinity. */
  private alongLink(from: Snap, to: Snap): number {
    if (from.link !== to.link) return Infinity;
    const l = from.link;
    if (to.t >= from.t && this.forward[l]) return (to.t - from.t) * this.linkLength[l]!;
    if (to.t <= from.t && this.backward[l]) return (from.t - to.t) * this.linkLength[l]!;
    return Infinity;
  }

  /**
   * The shortest route between two snapped points (A*), or undefined when `to` cannot be reached from `from`
   * with these options.
   */
  route(from: Snap, to: Snap, options: SearchOptions = {}): GraphRoute | undefined {
    const n = this.nodeCount;
    const START = n;
    const END = n + 1;
    // Scratch arrays reused by every search (searches are synchronous): an entry is valid only when its stamp
    // is this search's generation, so nothing is cleared or allocated per route.
    const scratch = (this.scratch ??= {
      cost: new Float64Array(n + 2),
      previous: new Int32Array(n + 2),
      via: new Int32Array(n + 2),
      seen: new Uint32Array(n + 2),
      closed: new Uint32Array(n + 2),
      generation: 0,
      heap: new MinHeap(256),
    });
    const generation = ++scratch.generation;
    const { cost, previous, via, seen, closed, heap } = scratch;
    heap.size = 0;
    const ex = to.x;
    const ey = to.y;
    const ez = this.altitude(to.floorId);
    const estimate = (i: number) => Math.hypot(this.nx[i]! - ex, this.ny[i]! - ey, this.nz[i]! - ez);
    const relax = (i: number, from: number, link: number, value: number) => {
      if (seen[i] === generation && value >= cost[i]!) return;
      if (value === Infinity) return;
      seen[i] = generation;
      cost[i] = value;
      previous[i] = from;
      via[i] = link;
      heap.push(i, value + (i === END ? 0 : estimate(i)));
    };
    seen[START] = generation;
    cost[START] = 0;
    previous[START] = -1;
    via[START] = NO_LINK;
    // Leaving the start: towards either end of its link, as the link's direction allows.
    const s = from.link;
    if (this.backward[s]) relax(this.linkA[s]!, START, s, from.t * this.linkLength[s]!);
    if (this.forward[s]) relax(this.linkB[s]!, START, s, (1 - from.t) * this.linkLength[s]!);
    relax(END, START, s, this.alongLink(from, to));
    // Reaching the end: from either end of its link.
    const e = to.link;
    const endA = this.forward[e] ? this.linkA[e]! : -1;
    const endB = this.backward[e] ? this.linkB[e]! : -1;
    while (heap.size > 0) {
      const i = heap.pop();
      if (closed[i] === generation) continue;
      closed[i] = generation;
      if (i === END) break;
      const base = cost[i]!;
      if (i === endA) relax(END, i, e, base + to.t * this.linkLength[e]!);
      if (i === endB) relax(END, i, e, base + (1 - to.t) * this.linkLength[e]!);
      for (let k = this.outStart[i]!; k < this.outStart[i + 1]!; k++) {
        const l = this.outLink[k]!;
        if (!this.usable(l, options)) continue;
        const j = this.other(l, i);
        if (closed[j] !== generation) relax(j, i, l, base + this.linkCost[l]!);
      }
    }
    if (closed[END] !== generation) return undefined;
    const vertices: RouteVertex[] = [];
    for (let i = END; i !== -1; i = previous[i]!) {
      if (i === END) vertices.push({ node: -1, floorId: to.floorId, x: to.x, y: to.y, via: via[i]! });
      else if (i === START) vertices.push({ node: -1, floorId: from.floorId, x: from.x, y: from.y, via: NO_LINK });
      else vertices.push({ node: i, floorId: this.nodeFloors[i]!, x: this.nx[i]!, y: this.ny[i]!, via: via[i]! });
    }
    vertices.reverse();
    return { distance: cost[END]!, vertices };
  }

  /**
   * Route distances from every point of the graph to `to` (a reverse Dijkstra, one per call): returns a function
   * giving the distance from any snapped point, Infinity when it cannot reach `to`. Ranking many devices by
   * route distance to one place costs one search, not one per device.
   */
  distancesTo(to: Snap, options: SearchOptions = {}): (from: Snap) => number {
    const n = this.nodeCount;
    const distance = new Float64Array(n).fill(Infinity);
    const closed = new Uint8Array(n);
    const heap = new MinHeap(256);
    const e = to.link;
    const seed = (i: number, value: number) => {
      if (value < distance[i]!) {
        distance[i] = value;
        heap.push(i, value);
      }
    };
    if (this.forward[e]) seed(this.linkA[e]!, to.t * this.linkLength[e]!);
    if (this.backward[e]) seed(this.linkB[e]!, (1 - to.t) * this.linkLength[e]!);
    while (heap.size > 0) {
      const i = heap.pop();
      if (closed[i]) continue;
      closed[i] = 1;
      const base = distance[i]!;
      for (let k = this.inStart[i]!; k < this.inStart[i + 1]!; k++) {
        const l = this.inLink[k]!;
        if (!this.usable(l, options)) continue;
        const j = this.other(l, i);
        if (!closed[j] && base + this.linkCost[l]! < distance[j]!) {
          distance[j] = base + this.linkCost[l]!;
          heap.push(j, distance[j]!);
        }
      }
    }
    return (from: Snap) => {
      const l = from.link;
      let best = this.alongLink(from, to);
      if (this.backward[l]) best = Math.min(best, from.t * this.linkLength[l]! + distance[this.linkA[l]!]!);
      if (this.forward[l]) best = Math.min(best, (1 - from.t) * this.linkLength[l]! + distance[this.linkB[l]!]!);
      return best;
    };
  }
}
