import type { Bus } from '../bus-channels.js';
import { NotFoundError, ValidationError } from '../../shared/errors.js';
import { bboxOf, distanceToSegment, pointInPolygon, segmentsIntersect, type Point } from '../../shared/geo/geometry.js';
import { describeRoute, type RouteStep } from '../../shared/routing/directions.js';
import { PathGraph, type GraphRoute, type SearchOptions, type Snap } from '../../shared/routing/path-graph.js';
import type { Storage } from '../../shared/storage/index.js';
import { BuildingPathsSchema, PoiSchema, type Geofence } from '../../shared/storage/entities/index.js';
import { confinedUserId } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import type { BuildingRegistry, BuildingRuntime } from '../realtime/building-registry.js';
import type { RealtimeService } from '../realtime/realtime-service.js';

/** A graph is rebuilt at the latest this long after it was built, even if a change announcement was missed. */
const GRAPH_TTL_MS = 5 * 60_000;
/** Buildings whose graphs are kept; past it the oldest is dropped. */
const MAX_GRAPHS = 500;

interface BuildingGraph {
  graph: PathGraph;
  floorNames: Map<number, string>;
  builtAt: number;
}

/** Where a route starts or ends: a point on a floor, or what names one (a device's live position, a POI, an alarm). */
export interface Endpoint {
  floorId?: number;
  x?: number;
  y?: number;
  deviceId?: string;
  poiId?: number;
  alarmId?: string;
}

export interface RouteRequest {
  from: Endpoint;
  to: Endpoint;
  accessible: boolean;
  avoidGeofenceIds: string[];
}

export interface Placed {
  floorId: number;
  x: number;
  y: number;
}

const round2 = (value: number) => Math.round(value * 100) / 100;

/**
 * Routes on a building's navigation graph, and devices ranked by route distance. Each building's graph is
 * built once from its stored paths and floors, shared by every request, and dropped when the bus announces a
 * change to the building's paths, floors or placement (the same announcement that rebuilds its geofence index),
 * when the bus may have missed such an announcement, and at the latest after GRAPH_TTL_MS.
 */
export class RoutingService {
  private readonly graphs = new Map<number, Promise<BuildingGraph>>();

  constructor(
    private readonly storage: Storage,
    private readonly registry: BuildingRegistry,
    /** Live queries (they take this gateway's interest in the buildings' live positions, realtime-service.ts). */
    private readonly live: Pick<RealtimeService, 'query'>,
    private readonly bus: Bus,
    private readonly now: () => number = Date.now,
  ) {}

  async start(): Promise<void> {
    await this.bus.subscribe('cartography:changed', (change) => {
      if (change.kind === 'paths' || change.kind === 'floor' || change.kind === 'building') this.graphs.delete(change.buildingId);
    });
    // A change announced while this node's bus was disconnected is lost: every graph is rebuilt on next use.
    this.bus.onResync(() => this.graphs.clear());
  }

  get cachedGraphs(): number {
    return this.graphs.size;
  }

  async route(principal: Principal, buildingId: number, request: RouteRequest) {
    const runtime = await this.runtime(principal, buildingId);
    const { graph, floorNames } = await this.graphOf(runtime);
    const options = this.searchOptions(runtime, graph, request);
    const [from, to] = await Promise.all([
      this.place(principal, runtime, request.from, 'from'),
      this.place(principal, runtime, request.to, 'to'),
    ]);
    const fromSnap = this.snap(graph, from, options, 'from');
    const toSnap = this.snap(graph, to, options, 'to');
    const found = graph.route(fromSnap, toSnap, options);
    if (!found)
      throw new ValidationError([
        {
          field: 'to',
          message: `not reachable from the start${request.accessible ? ' by accessible links' : ''}${request.avoidGeofenceIds.length > 0 ? ' while avoiding the given geofences' : ''}`,
        },
      ]);
    return this.present(runtime, graph, floorNames, found, fromSnap, toSnap, request.accessible);
  }

  /**
   * The route to a point from the nearest of several starts, nearest by route distance (plus each start's way
   * onto the paths): rescuers sent from the closest assembly point to a person missing in an evacuation. Starts
   * with no path on their floor are passed over; 422 when none reaches the point.
   */
  async routeFromNearest<K>(
    principal: Principal,
    buildingId: number,
    starts: readonly (Placed & { key: K })[],
    to: Placed,
    accessible: boolean,
  ): Promise<{ start: K; route: Awaited<ReturnType<RoutingService['route']>> }> {
    const runtime = await this.runtime(principal, buildingId);
    const { graph, floorNames } = await this.graphOf(runtime);
    const options: SearchOptions = { accessibleOnly: accessible };
    const toSnap = this.snap(graph, to, options, 'to');
    const distanceFrom = graph.distancesTo(toSnap, options);
    let best: { start: Placed & { key: K }; snap: Snap; distance: number } | undefined;
    for (const start of starts) {
      const snap = graph.snap(start.floorId, start.x, start.y, options);
      if (!snap) continue;
      const distance = distanceFrom(snap) + snap.distance;
      if (distance < (best?.distance ?? Infinity)) best = { start, snap, distance };
    }
    const found = best && graph.route(best.snap, toSnap, options);
    if (!best || !found)
      throw new ValidationError([{ field: 'to', message: `not reachable from any start${accessible ? ' by accessible links' : ''}` }]);
    return { start: best.start.key, route: this.present(runtime, graph, floorNames, found, best.snap, toSnap, accessible) };
  }

  /** A found route as the API answers it: metres, seconds, legs per floor with geographic points, and steps. */
  private present(
    runtime: BuildingRuntime,
    graph: PathGraph,
    floorNames: ReadonlyMap<number, string>,
    found: GraphRoute,
    fromSnap: Snap,
    toSnap: Snap,
    accessible: boolean,
  ) {
    const described = describeRoute(found, graph, (id) => floorNames.get(id) ?? `floor ${id}`);
    const geo = (point: { x: number; y: number }) => {
      const { lat, lng } = runtime.transform.toGeo(point);
      return { x: round2(point.x), y: round2(point.y), lat, lng };
    };
    return {
      building_id: runtime.id,
      distance_m: round2(found.distance),
      duration_s: described.duration_s,
      accessible,
      from: { floor_id: fromSnap.floorId, ...geo(fromSnap), snap_distance_m: round2(fromSnap.distance) },
      to: { floor_id: toSnap.floorId, ...geo(toSnap), snap_distance_m: round2(toSnap.distance) },
      legs: described.legs.map((leg) => ({ floor_id: leg.floor_id, distance_m: leg.distance_m, points: leg.points.map(geo) })),
      steps: described.steps as RouteStep[],
    };
  }

  /** Live devices of the building ranked by route distance to a point (nearest first), for dispatch. */
  async nearestDevices(
    principal: Principal,
    buildingId: number,
    target: Placed,
    options: { limit: number; accessible: boolean; maxAgeSeconds: number; groupId?: string },
  ) {
    const runtime = await this.runtime(principal, buildingId);
    const { graph } = await this.graphOf(runtime);
    if (!runtime.floors.has(target.floorId))
      throw new ValidationError([{ field: 'floor_id', message: `no floor ${target.floorId} in building ${buildingId}` }]);
    const search: SearchOptions = { accessibleOnly: options.accessible };
    const toSnap = this.snap(graph, target, search, 'to');
    const distanceFrom = graph.distancesTo(toSnap, search);
    const confined = confinedUserId(principal);
    // Responders of one group: devices whose user is in it.
    let userIds = confined !== undefined ? [confined] : undefined;
    if (options.groupId !== undefined) {
      const members = await this.storage.execute<{ id: string }>('select id from users where organization_id = ? and group_id = ?', [
        principal.organizationId,
        options.groupId,
      ]);
      userIds = members.map((member) => member.id).filter((id) => confined === undefined || id === confined);
    }
    const records = await this.live.query({
      organizationId: principal.organizationId,
      buildingIds: [runtime.id],
      indoor: true,
      since: this.now() - options.maxAgeSeconds * 1000,
      ...(userIds ? { userIds } : {}),
    });
    const ranked = [];
    for (const record of records) {
      if (record.floorId === null || record.x === null || record.y === null) continue;
      const snap = graph.snap(record.floorId, record.x, record.y, search);
      if (!snap) continue;
      const distance = distanceFrom(snap);
      if (distance === Infinity) continue;
      ranked.push({
        device_id: record.deviceId,
        user_id: record.userId,
        floor_id: record.floorId,
        x: record.x,
        y: record.y,
        time: new Date(record.timestamp).toISOString(),
        route_distance_m: round2(distance + snap.distance),
        snap_distance_m: round2(snap.distance),
        straight_distance_m: round2(
          Math.hypot(record.x - target.x, record.y - target.y, graph.altitude(record.floorId) - graph.altitude(target.floorId)),
        ),
      });
    }
    ranked.sort((a, b) => a.route_distance_m - b.route_distance_m || (a.device_id < b.device_id ? -1 : 1));
    return {
      building_id: runtime.id,
      floor_id: target.floorId,
      x: target.x,
      y: target.y,
      snap_distance_m: round2(toSnap.distance),
      data: ranked.slice(0, options.limit),
    };
  }

  private async runtime(principal: Principal, buildingId: number): Promise<BuildingRuntime> {
    const runtime = await this.registry.get(principal.organizationId, buildingId);
    if (!runtime) throw new NotFoundError('Building');
    return runtime;
  }

  private graphOf(runtime: BuildingRuntime): Promise<BuildingGraph> {
    const cached = this.graphs.get(runtime.id);
    if (cached) {
      // A graph past its age is rebuilt on the next request; this one is still answered with it.
      void cached.then(
        (entry) => {
          if (this.now() - entry.builtAt > GRAPH_TTL_MS && this.graphs.get(runtime.id) === cached) this.graphs.delete(runtime.id);
        },
        () => undefined,
      );
      return cached;
    }
    if (this.graphs.size >= MAX_GRAPHS) this.graphs.delete(this.graphs.keys().next().value!);
    const building = this.build(runtime);
    this.graphs.set(runtime.id, building);
    building.catch(() => this.graphs.delete(runtime.id));
    return building;
  }

  private async build(runtime: BuildingRuntime): Promise<BuildingGraph> {
    const builtAt = this.now();
    const [paths, floors] = await Promise.all([
      this.storage.em().findOne(BuildingPathsSchema, { buildingId: runtime.id }),
      this.storage.execute<{ id: number; name: string; level: number; level_height: number }>(
        'select id, name, level, level_height from floors where building_id = ?',
        [runtime.id],
      ),
    ]);
    const floorMap = new Map(floors.map((floor) => [floor.id, { level: floor.level, levelHeight: Number(floor.level_height) }]));
    return {
      graph: new PathGraph(paths?.nodes ?? [], paths?.links ?? [], floorMap),
      floorNames: new Map(floors.map((floor) => [floor.id, floor.name || `level ${floor.level}`])),
      builtAt,
    };
  }

  /** Accessibility, and the links crossing any geofence to avoid (each must be a geofence of this building). */
  private searchOptions(runtime: BuildingRuntime, graph: PathGraph, request: RouteRequest): SearchOptions {
    const options: SearchOptions = { accessibleOnly: request.accessible };
    if (request.avoidGeofenceIds.length === 0) return options;
    const blocked = new Set<number>();
    for (const id of request.avoidGeofenceIds) {
      const fence = runtime.geofences.find((geofence) => geofence.id === id);
      if (!fence) throw new ValidationError([{ field: 'avoid_geofence_ids', message: `no geofence ${id} in building ${runtime.id}` }]);
      for (const link of linksCrossing(graph, fence)) blocked.add(link);
    }
    options.blocked = blocked;
    return options;
  }

  private snap(graph: PathGraph, point: Placed, options: SearchOptions, field: 'from' | 'to'): Snap {
    const snap = graph.snap(point.floorId, point.x, point.y, options);
    if (!snap)
      throw new ValidationError([
        { field, message: `no ${options.accessibleOnly ? 'accessible ' : ''}path on floor ${point.floorId} to start or end on` },
      ]);
    return snap;
  }

  /** Resolves an endpoint to a point on a floor of the building, checking the caller may see what it names. */
  private async place(principal: Principal, runtime: BuildingRuntime, endpoint: Endpoint, field: 'from' | 'to'): Promise<Placed> {
    const onThisBuilding = (placed: Placed | undefined, what: string): Placed => {
      if (!placed || !runtime.floors.has(placed.floorId))
        throw new ValidationError([{ field, message: `${what} is not on a floor of building ${runtime.id}` }]);
      return placed;
    };
    if (endpoint.deviceId !== undefined) {
      const confined = confinedUserId(principal);
      const [record] = await this.live.query({ organizationId: principal.organizationId, deviceIds: [endpoint.deviceId] });
      if (!record || (confined !== undefined && record.userId !== confined))
        throw new ValidationError([{ field: `${field}_device_id`, message: 'no live position of that device' }]);
      const placed =
        record.floorId !== null && record.x !== null && record.y !== null
          ? { floorId: record.floorId, x: record.x, y: record.y }
          : undefined;
      return onThisBuilding(placed, `device ${endpoint.deviceId}'s live position`);
    }
    if (endpoint.poiId !== undefined) {
      const poi = await this.storage.em().findOne(PoiSchema, { id: endpoint.poiId, organization: principal.organizationId });
      if (!poi) throw new ValidationError([{ field: `${field}_poi_id`, message: 'no such POI in your organization' }]);
      const placed =
        poi.indoor && poi.floorId != null && poi.x != null && poi.y != null && poi.buildingId === runtime.id
          ? { floorId: poi.floorId, x: poi.x, y: poi.y }
          : undefined;
      return onThisBuilding(placed, `POI ${endpoint.poiId}`);
    }
    if (endpoint.alarmId !== undefined) {
      const confined = confinedUserId(principal);
      const [alarm] = await this.storage.execute<{
        building_id: number | null;
        floor_id: number | null;
        x: number | null;
        y: number | null;
        user_id: string | null;
      }>('select building_id, floor_id, x, y, user_id from alarms where id = ? and organization_id = ?', [
        endpoint.alarmId,
        principal.organizationId,
      ]);
      if (!alarm || (confined !== undefined && alarm.user_id !== confined))
        throw new ValidationError([{ field: `${field}_alarm_id`, message: 'no such alarm' }]);
      const placed =
        alarm.building_id === runtime.id && alarm.floor_id !== null && alarm.x !== null && alarm.y !== null
          ? { floorId: alarm.floor_id, x: alarm.x, y: alarm.y }
          : undefined;
      return onThisBuilding(placed, `alarm ${endpoint.alarmId}`);
    }
    return onThisBuilding({ floorId: endpoint.floorId!, x: endpoint.x!, y: endpoint.y! }, `floor ${endpoint.floorId}`);
  }
}

/** Links of the geofence's floor that enter it: an end inside, or crossing its outline (or its radius, for circles, points and lines). */
export function linksCrossing(graph: PathGraph, fence: Pick<Geofence, 'floorId' | 'type' | 'cartesians' | 'radius'>): number[] {
  const points = fence.cartesians as Point[];
  if (points.length === 0) return [];
  const radius = fence.radius ?? 0;
  const box = bboxOf(points);
  const candidates = graph.linksNear(fence.floorId, {
    minX: box.minX - radius,
    minY: box.minY - radius,
    maxX: box.maxX + radius,
    maxY: box.maxY + radius,
  });
  const crossing: number[] = [];
  for (const l of candidates) {
    const a: Point = [graph.nx[graph.linkA[l]!]!, graph.ny[graph.linkA[l]!]!];
    const b: Point = [graph.nx[graph.linkB[l]!]!, graph.ny[graph.linkB[l]!]!];
    let enters: boolean;
    if (fence.type === 'POLYGON') {
      enters = pointInPolygon(a, points) || pointInPolygon(b, points);
      for (let i = 1; !enters && i < points.length; i++) enters = segmentsIntersect(a, b, points[i - 1]!, points[i]!);
    } else if (fence.type === 'LINE') {
      enters = false;
      for (let i = 1; !enters && i < points.length; i++) {
        const p = points[i - 1]!;
        const q = points[i]!;
        enters =
          segmentsIntersect(a, b, p, q) ||
          Math.min(distanceToSegment(p, a, b), distanceToSegment(q, a, b), distanceToSegment(a, p, q), distanceToSegment(b, p, q)) <=
            radius;
      }
    } else {
      enters = distanceToSegment(points[0]!, a, b) <= radius;
    }
    if (enters) crossing.push(l);
  }
  return crossing;
}
