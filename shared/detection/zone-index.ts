/**
 * The spatial half of "tag, then compare": one building's geofences and event areas, per floor, in rbush and a
 * grid of cells filled from it, so a position is tagged with the zones that contain it. Its zones are immutable:
 * a cartography change builds a new index and the caller swaps it in, so a position never sees a half-rebuilt
 * one (the cells are a cache of answers the tree gives).
 */
import RBush from 'rbush';
import {
  bboxOf,
  circleContains,
  distanceToPolyline,
  flattenRing,
  pointInFlatRing,
  pointInPolygon,
  type BBox,
  type Point,
} from '../geo/geometry.js';
import type { CartographyEvent, Circle } from '../storage/entities/event.entity.js';
import type { Geofence } from '../storage/entities/geofence.entity.js';

export type ZoneKind = 'geofence' | 'event' | 'conversion';

/** Floor cartesians, metres. `radius` of point and line is the capture distance. */
export type ZoneShape =
  | { type: 'polygon'; ring: readonly Point[] }
  | { type: 'circle'; center: Point; radius: number }
  | { type: 'point'; point: Point; radius: number }
  | { type: 'line'; points: readonly Point[]; radius: number };

export interface Zone {
  /** `zoneKey(kind, stored id)`: unique across kinds so tags can share one set; read as a name, never parsed. */
  id: string;
  kind: ZoneKind;
  floorId: number;
  shape: ZoneShape;
}

/** What the index needs of a geofence row; the entity itself fits. */
export type GeofenceSource = Pick<Geofence, 'id' | 'floorId' | 'type' | 'radius' | 'deleted'> & { cartesians: readonly Point[] };

/** What the index needs of an event row; the entity itself fits. */
export type EventSource = Pick<CartographyEvent, 'id' | 'floorId' | 'x' | 'y' | 'radius'> & {
  conversion?: Pick<Circle, 'floorId' | 'x' | 'y' | 'radius'> | null;
};

/** The API allows a null radius on POINT and LINE; without a capture distance they could never be hit. */
export const DEFAULT_CAPTURE_RADIUS_M = 1;

interface Item extends BBox {
  zone: Zone;
  /** A polygon's ring, flattened for the exact test; null for the other shapes. */
  ring: Float64Array | null;
  /** Position in its floor's items: what grid cells hold. */
  ordinal: number;
  /** A polygon's edges by band of block rows (`ringBands`), listed at its first fill; null: every edge is looked at. */
  bands?: Map<number, Int32Array> | null;
}

const finite = (p: Point | undefined): p is Point => p !== undefined && Number.isFinite(p[0]) && Number.isFinite(p[1]);
const validRadius = (r: number) => Number.isFinite(r) && r >= 0;

/**
 * The box to index, or null for a shape nothing can be inside of. Rows are validated on write, but a rebuild
 * must not fail (and leave the building without alarms) because of one bad legacy row.
 */
export function zoneBBox(shape: ZoneShape): BBox | null {
  switch (shape.type) {
    case 'polygon':
      return shape.ring.length >= 3 && shape.ring.every(finite) ? bboxOf(shape.ring) : null;
    case 'circle':
    case 'point': {
      const c = shape.type === 'circle' ? shape.center : shape.point;
      if (!finite(c) || !validRadius(shape.radius)) return null;
      return { minX: c[0] - shape.radius, minY: c[1] - shape.radius, maxX: c[0] + shape.radius, maxY: c[1] + shape.radius };
    }
    case 'line': {
      if (shape.points.length === 0 || !shape.points.every(finite) || !validRadius(shape.radius)) return null;
      const box = bboxOf(shape.points);
      return { minX: box.minX - shape.radius, minY: box.minY - shape.radius, maxX: box.maxX + shape.radius, maxY: box.maxY + shape.radius };
    }
  }
}

/** Exact test, boundary inclusive for every shape so standing on a fence line does not flap. */
export function zoneContains(zone: Zone, x: number, y: number): boolean {
  const p: Point = [x, y];
  const shape = zone.shape;
  switch (shape.type) {
    case 'polygon':
      return pointInPolygon(p, shape.ring);
    case 'circle':
      return circleContains(shape.center, shape.radius, p);
    case 'point':
      return circleContains(shape.point, shape.radius, p);
    case 'line':
      return distanceToPolyline(p, shape.points) <= shape.radius;
  }
}

/** Side of a grid cell, metres: small against fences of a few metres, so few of them cross any one cell. */
const CELL_M = 1;
/** Cells are filled a square block of this many a side at a time. */
const BLOCK_CELLS = 4;
/** Cells are keyed by `ix * CELL_KEY_SPAN + iy`: exact integers while |ix|, |iy| stay under half the span. */
const CELL_KEY_SPAN = 2 ** 26;
/**
 * What one floor's cached cells may hold (zone ordinals, plus a few per cell for the cell itself) before they are
 * dropped and rebuilt as positions need them: about 16 MB; a 200 x 200 m floor with 10,000 fences needs half.
 */
const MAX_CELL_ENTRIES = 4_000_000;
const CELL_OVERHEAD_ENTRIES = 16;
/**
 * How far a fence line must stay from a cell for the whole cell to be decided once: far above the rounding of
 * the exact tests (about 1e-13 m on floors of a few km), far below any distance a position can tell apart.
 */
const EDGE_MARGIN_M = 1e-6;

/** Zones of one grid cell: those containing all of it first, then those whose boundary may cross it. */
interface Cell {
  /** Ordinals into the floor's items. */
  ordinals: Int32Array;
  /** How many of `ordinals`, from the first, contain the whole cell: no test needed. */
  inside: number;
}

const OUTSIDE = 0;
const INSIDE = 1;
const CROSSED = 2;
type Placement = typeof OUTSIDE | typeof INSIDE | typeof CROSSED;

/** Scratch of `placeRingInBlock`, one slot per cell of a block: no allocation per fill. */
const blockCrossed = new Uint8Array(BLOCK_CELLS * BLOCK_CELLS);
const blockParity = new Uint8Array(BLOCK_CELLS * BLOCK_CELLS);
const blockPlacements = new Uint8Array(BLOCK_CELLS * BLOCK_CELLS);
const NO_EDGES = new Int32Array(0);

/** A band of blocks' rows: the block rows at y in [band * BAND_M, (band + 1) * BAND_M). */
const BAND_M = BLOCK_CELLS * CELL_M;
/** Edge listings a ring's bands may hold per edge before the ring is scanned whole instead (edges kilometres long). */
const MAX_BAND_ENTRIES_PER_EDGE = 16;

/**
 * A ring's edges (as the ring index of their end vertex) listed by band: every edge that reaches within a cell of a
 * band's rows is in its list, which is all a block of that band's fill needs (placeRingInBlock rejects the others
 * first), in ring order; one band of slack each side. Null when edges span so many bands that listing them would
 * cost more than it saves.
 */
function ringBands(ring: Float64Array): Map<number, Int32Array> | null {
  const spans: number[] = [];
  let entries = 0;
  for (let i = 0, j = ring.length - 2; i < ring.length; j = i, i += 2) {
    const from = Math.floor(Math.min(ring[j + 1]!, ring[i + 1]!) / BAND_M) - 1;
    const to = Math.floor(Math.max(ring[j + 1]!, ring[i + 1]!) / BAND_M) + 1;
    spans.push(from, to);
    entries += to - from + 1;
  }
  if (entries > MAX_BAND_ENTRIES_PER_EDGE * (ring.length / 2)) return null;
  const lists = new Map<number, number[]>();
  for (let edge = 0; edge < spans.length / 2; edge++) {
    for (let band = spans[2 * edge]!; band <= spans[2 * edge + 1]!; band++) {
      let list = lists.get(band);
      if (!list) lists.set(band, (list = []));
      list.push(2 * edge);
    }
  }
  return new Map([...lists].map(([band, list]) => [band, Int32Array.from(list)]));
}

/**
 * Where a polygon lies relative to each cell (a closed box) cx0..cx1 x cy0..cy1 of the block whose first cell is
 * (bx, by), into `placements` (slot `(cx - bx) * BLOCK_CELLS + (cy - by)`). No edge comes within `EDGE_MARGIN_M`
 * of a cell: the crossing parity, which is what `pointInFlatRing` computes, is then the same for every point of
 * it, so the centre decides (INSIDE or OUTSIDE). Otherwise CROSSED, and each position runs the exact test.
 *
 * One pass over the ring's edges for the whole block, not one per cell and another per cell centre: each edge is
 * tested only against the cells near its box (one cell of slack each side, where the box test rejects), and
 * takes its part in the parity of the centres of the rows its y span covers; the tests are those of a cell at a
 * time and pointInFlatRing's crossing test, term for term (its boundary test cannot hold at the centre of a cell
 * no edge comes near). `edges`: those to look at (ring indices of their end vertex, `ringBands`), or all. A block of
 * 200 fences of 1,000 vertices, one cell at a time, held the event loop 10-30 ms (issue 28 item 6).
 */
function placeRingInBlock(
  ring: Float64Array,
  edges: Int32Array | null,
  bx: number,
  by: number,
  cx0: number,
  cx1: number,
  cy0: number,
  cy1: number,
  placements: Uint8Array,
): void {
  blockCrossed.fill(0);
  blockParity.fill(0);
  // Edges wholly above or below the rows asked for, with a cell to spare, touch none of them: most, by far.
  const belowRows = cy0 * CELL_M - CELL_M;
  const aboveRows = (cy1 + 2) * CELL_M;
  const count = edges ? edges.length : ring.length / 2;
  for (let edge = 0; edge < count; edge++) {
    const i = edges ? edges[edge]! : 2 * edge;
    const j = i === 0 ? ring.length - 2 : i - 2;
    const ay = ring[j + 1]!;
    const bye = ring[i + 1]!;
    if ((ay < belowRows && bye < belowRows) || (ay > aboveRows && bye > aboveRows)) continue;
    const ax = ring[j]!;
    const bxe = ring[i]!;
    const lowY = Math.min(ay, bye);
    const highY = Math.max(ay, bye);
    const rowFrom = Math.max(cy0, Math.floor((lowY - EDGE_MARGIN_M) / CELL_M) - 1);
    const rowTo = Math.min(cy1, Math.floor((highY + EDGE_MARGIN_M) / CELL_M) + 1);
    if (rowFrom > rowTo) continue;
    const lowX = Math.min(ax, bxe);
    const highX = Math.max(ax, bxe);
    const dx = bxe - ax;
    const dy = bye - ay;
    // Whether the edge comes near a cell: its box, then the sides of the edge's line the cell's corners are on.
    const colFrom = Math.max(cx0, Math.floor((lowX - EDGE_MARGIN_M) / CELL_M) - 1);
    const colTo = Math.min(cx1, Math.floor((highX + EDGE_MARGIN_M) / CELL_M) + 1);
    for (let cx = colFrom; cx <= colTo; cx++) {
      const x0 = cx * CELL_M - EDGE_MARGIN_M;
      const x1 = (cx + 1) * CELL_M + EDGE_MARGIN_M;
      if ((ax < x0 && bxe < x0) || (ax > x1 && bxe > x1)) continue;
      for (let cy = rowFrom; cy <= rowTo; cy++) {
        const slot = (cx - bx) * BLOCK_CELLS + (cy - by);
        if (blockCrossed[slot]) continue;
        const y0 = cy * CELL_M - EDGE_MARGIN_M;
        const y1 = (cy + 1) * CELL_M + EDGE_MARGIN_M;
        if ((ay < y0 && bye < y0) || (ay > y1 && bye > y1)) continue;
        const c1 = dx * (y0 - ay) - dy * (x0 - ax);
        const c2 = dx * (y0 - ay) - dy * (x1 - ax);
        const c3 = dx * (y1 - ay) - dy * (x0 - ax);
        const c4 = dx * (y1 - ay) - dy * (x1 - ax);
        if ((c1 > 0 && c2 > 0 && c3 > 0 && c4 > 0) || (c1 < 0 && c2 < 0 && c3 < 0 && c4 < 0)) continue;
        blockCrossed[slot] = 1;
      }
    }
    // The edge's part in the centres' parity (pointInFlatRing's crossing test): only rows whose centre is in its y span.
    for (let cy = rowFrom; cy <= rowTo; cy++) {
      const py = (cy * CELL_M + (cy + 1) * CELL_M) / 2;
      if (py < lowY || py > highY) continue;
      for (let cx = cx0; cx <= cx1; cx++) {
        const slot = (cx - bx) * BLOCK_CELLS + (cy - by);
        const px = (cx * CELL_M + (cx + 1) * CELL_M) / 2;
        if (ay > py !== bye > py && px < (dx * (py - ay)) / dy + ax) blockParity[slot] ^= 1;
      }
    }
  }
  for (let cx = cx0; cx <= cx1; cx++) {
    for (let cy = cy0; cy <= cy1; cy++) {
      const slot = (cx - bx) * BLOCK_CELLS + (cy - by);
      placements[slot] = blockCrossed[slot] ? CROSSED : blockParity[slot] ? INSIDE : OUTSIDE;
    }
  }
}

/** The same for a disc (circle and point zones): the farthest and nearest points of the widened box decide. */
function placeDisc(center: Point, radius: number, minX: number, minY: number, maxX: number, maxY: number): Placement {
  const [cx, cy] = center;
  const x0 = minX - EDGE_MARGIN_M;
  const y0 = minY - EDGE_MARGIN_M;
  const x1 = maxX + EDGE_MARGIN_M;
  const y1 = maxY + EDGE_MARGIN_M;
  const fx = Math.max(cx - x0, x1 - cx);
  const fy = Math.max(cy - y0, y1 - cy);
  if (fx * fx + fy * fy <= radius * radius) return INSIDE;
  const nx = cx - Math.min(Math.max(cx, x0), x1);
  const ny = cy - Math.min(Math.max(cy, y0), y1);
  return nx * nx + ny * ny > radius * radius ? OUTSIDE : CROSSED;
}

/** A cell's placement for the zones other than polygons (those are placed a block at a time). */
function placeShape(item: Item, minX: number, minY: number, maxX: number, maxY: number): Placement {
  const shape = item.zone.shape;
  if (shape.type === 'circle') return placeDisc(shape.center, shape.radius, minX, minY, maxX, maxY);
  if (shape.type === 'point') return placeDisc(shape.point, shape.radius, minX, minY, maxX, maxY);
  return CROSSED;
}

/** The exact test, behind the box test that rejects most candidates. */
function itemContains(item: Item, x: number, y: number): boolean {
  if (item.minX > x || x > item.maxX || item.minY > y || y > item.maxY) return false;
  return item.ring ? pointInFlatRing(x, y, item.ring) : zoneContains(item.zone, x, y);
}

/**
 * One floor's zones: an rbush over their boxes, and a uniform grid of cells, each listing the zones that contain
 * all of it and those that cross it. A cell is filled (with its block) from the tree the first time a position
 * falls in it; after that a position costs a lookup, the zones containing its cell, and exact tests only on the
 * few fences whose line crosses the cell, however many fences the floor has.
 */
class FloorZones {
  private readonly tree: RBush<Item>;
  private readonly cells = new Map<number, Cell>();
  private entries = 0;
  /** The box of every zone of the floor: positions outside it meet no zone and fill no cell. */
  private readonly extent: BBox;

  constructor(readonly items: readonly Item[]) {
    // Bulk load: faster than inserts and gives a better-packed tree for the queries that follow.
    this.tree = new RBush<Item>().load(items.slice());
    this.extent = { minX: Infinity, minY: Infinity, maxX: -Infinity, maxY: -Infinity };
    for (const item of items) {
      this.extent.minX = Math.min(this.extent.minX, item.minX);
      this.extent.minY = Math.min(this.extent.minY, item.minY);
      this.extent.maxX = Math.max(this.extent.maxX, item.maxX);
      this.extent.maxY = Math.max(this.extent.maxY, item.maxY);
    }
  }

  /** Pushes the zones containing (x, y) onto `into`. */
  collect(x: number, y: number, into: Zone[]): void {
    const { extent, items } = this;
    if (!(x >= extent.minX && x <= extent.maxX && y >= extent.minY && y <= extent.maxY)) return; // NaN too
    const ix = Math.floor(x / CELL_M);
    const iy = Math.floor(y / CELL_M);
    if (Math.abs(ix) >= CELL_KEY_SPAN / 2 || Math.abs(iy) >= CELL_KEY_SPAN / 2) {
      for (const item of this.tree.search({ minX: x, minY: y, maxX: x, maxY: y })) if (itemContains(item, x, y)) into.push(item.zone);
      return;
    }
    const key = ix * CELL_KEY_SPAN + iy;
    const cell = this.cells.get(key) ?? this.fill(ix, iy);
    const { ordinals, inside } = cell;
    for (let k = 0; k < inside; k++) into.push(items[ordinals[k]!]!.zone);
    for (let k = inside; k < ordinals.length; k++) {
      const item = items[ordinals[k]!]!;
      if (itemContains(item, x, y)) into.push(item.zone);
    }
  }

  /**
   * Fills the block of `BLOCK_CELLS` x `BLOCK_CELLS` cells around (ix, iy) from one search of the tree (the
   * search, not the tests, was most of filling a cell alone), and returns the cell asked for.
   */
  private fill(ix: number, iy: number): Cell {
    const bx = Math.floor(ix / BLOCK_CELLS) * BLOCK_CELLS;
    const by = Math.floor(iy / BLOCK_CELLS) * BLOCK_CELLS;
    const inside: number[][] = Array.from({ length: BLOCK_CELLS * BLOCK_CELLS }, () => []);
    const crossed: number[][] = Array.from({ length: BLOCK_CELLS * BLOCK_CELLS }, () => []);
    const box = { minX: bx * CELL_M, minY: by * CELL_M, maxX: (bx + BLOCK_CELLS) * CELL_M, maxY: (by + BLOCK_CELLS) * CELL_M };
    for (const item of this.tree.search(box)) {
      // The cells of the block the item's box may meet (widened by the margin: a cell too many is only tested).
      const cx0 = Math.max(bx, Math.floor((item.minX - EDGE_MARGIN_M) / CELL_M));
      const cx1 = Math.min(bx + BLOCK_CELLS - 1, Math.floor((item.maxX + EDGE_MARGIN_M) / CELL_M));
      const cy0 = Math.max(by, Math.floor((item.minY - EDGE_MARGIN_M) / CELL_M));
      const cy1 = Math.min(by + BLOCK_CELLS - 1, Math.floor((item.maxY + EDGE_MARGIN_M) / CELL_M));
      if (item.ring) {
        if (item.bands === undefined) item.bands = ringBands(item.ring);
        const edges = item.bands ? (item.bands.get(by / BLOCK_CELLS) ?? NO_EDGES) : null;
        placeRingInBlock(item.ring, edges, bx, by, cx0, cx1, cy0, cy1, blockPlacements);
      }
      for (let cx = cx0; cx <= cx1; cx++) {
        for (let cy = cy0; cy <= cy1; cy++) {
          const slot = (cx - bx) * BLOCK_CELLS + (cy - by);
          const placement = item.ring
            ? blockPlacements[slot]!
            : placeShape(item, cx * CELL_M, cy * CELL_M, (cx + 1) * CELL_M, (cy + 1) * CELL_M);
          if (placement === INSIDE) inside[slot]!.push(item.ordinal);
          else if (placement === CROSSED) crossed[slot]!.push(item.ordinal);
        }
      }
    }
    let added = 0;
    for (let slot = 0; slot < inside.length; slot++) added += inside[slot]!.length + crossed[slot]!.length + CELL_OVERHEAD_ENTRIES;
    if (this.entries + added > MAX_CELL_ENTRIES) {
      this.cells.clear();
      this.entries = 0;
    }
    this.entries += added;
    for (let slot = 0; slot < inside.length; slot++) {
      const ordinals = new Int32Array(inside[slot]!.length + crossed[slot]!.length);
      ordinals.set(inside[slot]!);
      ordinals.set(crossed[slot]!, inside[slot]!.length);
      const cx = bx + Math.floor(slot / BLOCK_CELLS);
      const cy = by + (slot % BLOCK_CELLS);
      // A block can reach past the keyed span, where keys would meet those of other cells; those cells are never asked for.
      if (Math.abs(cx) < CELL_KEY_SPAN / 2 && Math.abs(cy) < CELL_KEY_SPAN / 2)
        this.cells.set(cx * CELL_KEY_SPAN + cy, { ordinals, inside: inside[slot]!.length });
    }
    return this.cells.get(ix * CELL_KEY_SPAN + iy)!;
  }
}

export class ZoneIndex {
  private readonly floors = new Map<number, FloorZones>();
  /** Zones actually indexed (those with an unusable shape are left out). */
  readonly size: number;

  constructor(zones: Iterable<Zone>) {
    const byFloor = new Map<number, Item[]>();
    let size = 0;
    for (const zone of zones) {
      const box = zoneBBox(zone.shape);
      if (!box) continue;
      let items = byFloor.get(zone.floorId);
      if (!items) byFloor.set(zone.floorId, (items = []));
      // Spelled out, not spread: rbush reads these boxes on every query, and a spread copy made slow objects.
      const ring = zone.shape.type === 'polygon' ? flattenRing(zone.shape.ring) : null;
      items.push({ minX: box.minX, minY: box.minY, maxX: box.maxX, maxY: box.maxY, zone, ring, ordinal: items.length, bands: undefined });
      size++;
    }
    for (const [floorId, items] of byFloor) this.floors.set(floorId, new FloorZones(items));
    this.size = size;
  }

  /**
   * Zones of that floor containing (x, y), in no particular order (compare as a set). They are pushed onto `into`
   * after emptying it, so a caller tagging position after position can hand the same array every time.
   */
  zonesAt(floorId: number, x: number, y: number, into: Zone[] = []): Zone[] {
    into.length = 0;
    this.floors.get(floorId)?.collect(x, y, into);
    return into;
  }
}

/** The key of the zone of this kind stored under this id: the geofence uuid, `event:<id>` or `conversion:<id>`. */
export const zoneKey = (kind: ZoneKind, storedId: string | number): string =>
  kind === 'geofence' ? String(storedId) : `${kind}:${storedId}`;

export function geofenceZone(geofence: GeofenceSource): Zone | null {
  if (geofence.deleted) return null;
  const points = geofence.cartesians;
  const base = { id: zoneKey('geofence', geofence.id), kind: 'geofence' as const, floorId: geofence.floorId };
  const capture = geofence.radius ?? DEFAULT_CAPTURE_RADIUS_M;
  switch (geofence.type) {
    case 'POLYGON':
      return { ...base, shape: { type: 'polygon', ring: points } };
    case 'CIRCLE':
      // A circle without a radius is rejected on write; guessing one here would invent an area nobody drew.
      return geofence.radius == null || points.length === 0
        ? null
        : { ...base, shape: { type: 'circle', center: points[0], radius: geofence.radius } };
    case 'POINT':
      return points.length === 0 ? null : { ...base, shape: { type: 'point', point: points[0], radius: capture } };
    case 'LINE':
      return { ...base, shape: { type: 'line', points, radius: capture } };
    default:
      return null;
  }
}

/** Every zone of one building's cartography: live geofences, event trigger areas and conversion areas. */
export function zonesFromCartography(geofences: Iterable<GeofenceSource>, events: Iterable<EventSource>): Zone[] {
  const zones: Zone[] = [];
  for (const geofence of geofences) {
    const zone = geofenceZone(geofence);
    if (zone) zones.push(zone);
  }
  for (const event of events) {
    zones.push({
      id: zoneKey('event', event.id),
      kind: 'event',
      floorId: event.floorId,
      shape: { type: 'circle', center: [event.x, event.y], radius: event.radius },
    });
    const conversion = event.conversion;
    if (conversion) {
      zones.push({
        id: zoneKey('conversion', event.id),
        kind: 'conversion',
        floorId: conversion.floorId,
        shape: { type: 'circle', center: [conversion.x, conversion.y], radius: conversion.radius },
      });
    }
  }
  return zones;
}
