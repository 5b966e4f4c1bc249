import { buildingTransform } from '../gateway/cartography/cartography-service.js';
import type { BuildingRegistry, BuildingRuntime } from '../gateway/realtime/building-registry.js';
import type { Building, Geofence } from '../shared/storage/entities/index.js';

/**
 * Detection's inputs built from rows made here, as the building registry would hold them, so the detectors run
 * without a database or a gateway: the unit tests of test/unit/detection and the in-process benchmarks of bench/
 * both build their buildings and fences with these (their positions with testkit/positions.ts).
 */

/** A 10 m square with a corner at the floor's origin, closed. */
export const SQUARE_10M: number[][] = [
  [0, 0],
  [10, 0],
  [10, 10],
  [0, 10],
  [0, 0],
];

/** A geofence row: `fence-1`, a 10 m square at the origin of floor 1 of building 1, with no rules, unless `fields` say otherwise. */
export function geofenceRow(fields: Partial<Geofence> = {}): Geofence {
  return {
    id: 'fence-1',
    buildingId: 1,
    floorId: 1,
    name: 'Square',
    type: 'POLYGON',
    radius: null,
    deleted: false,
    customFields: [],
    geometric: [],
    cartesians: SQUARE_10M,
    maxStayTime: null,
    minDwellS: 0,
    exitGraceS: 0,
    ...fields,
  } as unknown as Geofence;
}

/** A building row: building 1 at (40, -3), 100 × 100 m, not rotated, without dead-man settings, unless `fields` say otherwise. */
export function buildingRow(fields: Partial<Building> = {}): Building {
  return { id: 1, name: 'B', locationLat: 40, locationLng: -3, width: 100, length: 100, rotation: 0, ...fields } as unknown as Building;
}

/**
 * The runtime the registry builds for `building` (same id, its transform), with `geofences` and one floor,
 * `floorId` (1 unless given).
 */
export function buildingRuntime(
  building: Building,
  geofences: Geofence[] = [],
  options: { organizationId?: string; floorId?: number; loadedAt?: number } = {},
): BuildingRuntime {
  return {
    id: building.id,
    organizationId: options.organizationId ?? 'org',
    building,
    transform: buildingTransform(building),
    floors: new Map([[options.floorId ?? 1, { level: 0, levelHeight: 0 }]]),
    geofences,
    events: [],
    loadedAt: options.loadedAt ?? 0,
  };
}

/** A registry that answers `peek` (all detection asks of it) from `find`: a map's lookup, or the one current runtime. */
export const peekingRegistry = (find: (id: number) => BuildingRuntime | undefined): BuildingRegistry =>
  ({ peek: find }) as unknown as BuildingRegistry;
