/**
 * The spatial half of "tag, then compare": one building's geofences and event areas, per floor, in rbush, so a
 * position is tagged with the zones that contain it. Immutable: a cartography change builds a new index and the
 * caller swaps it in, so a position never sees a half-rebuilt tree.
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
  /** Geofence uuid, `event:<id>` or `conversion:<id>`: unique across kinds so tags can share one set. */
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

/** Half the side of a neighbourhood square, metres: a few seconds of walking. */
const NEIGHBOURHOOD_M = 2;

/** Candidate zones around a position, valid for one index (a rebuilt index makes it stale). */
export interface Neighbourhood extends BBox {
  readonly index: ZoneIndex;
  readonly floorId: number;
  readonly candidates: readonly Item[];
}

function containing(items: readonly Item[], x: number, y: number): Zone[] {
  const found: Zone[] = [];
  for (const item of items) {
    if (item.minX > x || x > item.maxX || item.minY > y || y > item.maxY) continue;
    if (item.ring ? pointInFlatRing(x, y, item.ring) : zoneContains(item.zone, x, y)) found.push(item.zone);
  }
  return found;
}

export class ZoneIndex {
  private readonly floors = new Map<number, RBush<Item>>();
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
      items.push({ minX: box.minX, minY: box.minY, maxX: box.maxX, maxY: box.maxY, zone, ring });
      size++;
    }
    // Bulk load: faster than inserts and gives a better-packed tree for the queries that follow.
    for (const [floorId, items] of byFloor) this.floors.set(floorId, new RBush<Item>().load(items));
    this.size = size;
  }

  /** Zones of that floor containing (x, y); order is unspecified, compare as a set. */
  zonesAt(floorId: number, x: number, y: number): Zone[] {
    const tree = this.floors.get(floorId);
    if (!tree) return [];
    return containing(tree.search({ minX: x, minY: y, maxX: x, maxY: y }), x, y);
  }

  /**
   * The same answer as `zonesAt`, using (and refreshing) a caller-held neighbourhood: the zones whose boxes
   * meet a square of `NEIGHBOURHOOD_M` around an earlier position. A device at walking speed stays inside it for
   * several positions, which then skip the tree and only run the exact tests on those few candidates.
   */
  zonesNear(floorId: number, x: number, y: number, near: Neighbourhood | undefined): { zones: Zone[]; near: Neighbourhood | undefined } {
    if (near && near.index === this && near.floorId === floorId && near.minX <= x && x <= near.maxX && near.minY <= y && y <= near.maxY) {
      return { zones: containing(near.candidates, x, y), near };
    }
    const tree = this.floors.get(floorId);
    if (!tree) return { zones: [], near: undefined };
    const [minX, minY, maxX, maxY] = [x - NEIGHBOURHOOD_M, y - NEIGHBOURHOOD_M, x + NEIGHBOURHOOD_M, y + NEIGHBOURHOOD_M];
    // Kept by every device between positions: spelled out (a spread makes a slow, large object), exact length.
    const fresh: Neighbourhood = { index: this, floorId, minX, minY, maxX, maxY, candidates: tree.search({ minX, minY, maxX, maxY }).slice() };
    return { zones: containing(fresh.candidates, x, y), near: fresh };
  }
}

export function geofenceZone(geofence: GeofenceSource): Zone | null {
  if (geofence.deleted) return null;
  const points = geofence.cartesians;
  const base = { id: geofence.id, kind: 'geofence' as const, floorId: geofence.floorId };
  const capture = geofence.radius ?? DEFAULT_CAPTURE_RADIUS_M;
  switch (geofence.type) {
    case 'POLYGON':
      return { ...base, shape: { type: 'polygon', ring: points } };
    case 'CIRCLE':
      // A circle without a radius is rejected on write; guessing one here would invent an area nobody drew.
      return geofence.radius == null || points.length === 0 ? null : { ...base, shape: { type: 'circle', center: points[0], radius: geofence.radius } };
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
      id: `event:${event.id}`,
      kind: 'event',
      floorId: event.floorId,
      shape: { type: 'circle', center: [event.x, event.y], radius: event.radius },
    });
    const conversion = event.conversion;
    if (conversion) {
      zones.push({
        id: `conversion:${event.id}`,
        kind: 'conversion',
        floorId: conversion.floorId,
        shape: { type: 'circle', center: [conversion.x, conversion.y], radius: conversion.radius },
      });
    }
  }
  return zones;
}
