import type { Bus } from '../../shared/bus/index.js';
import { containsGeo, type BuildingTransform, type LatLng } from '../../shared/geo/building-transform.js';
import type { Logger } from '../../shared/logger.js';
import type { Storage } from '../../shared/storage/index.js';
import { BuildingSchema, EventSchema, FloorSchema, GeofenceSchema, type Building, type CartographyEvent, type Geofence } from '../../shared/storage/entities/index.js';
import { CARTOGRAPHY_CHANNEL, buildingTransform, type CartographyChange } from '../cartography/cartography-service.js';

/** What the hot path needs of a building, kept in memory and rebuilt when its cartography changes. */
export interface BuildingRuntime {
  id: number;
  organizationId: string;
  building: Building;
  transform: BuildingTransform;
  floors: Map<number, { level: number; levelHeight: number }>;
  geofences: Geofence[];
  events: CartographyEvent[];
  loadedAt: number;
}

/** Extra per-building state derived at load (the spatial index), contributed by other modules. */
export type RuntimeExtension = (runtime: BuildingRuntime) => void;

/**
 * Per-building runtime state, loaded on first use and dropped when the bus announces a change to that
 * building, so every gateway sees new cartography on its next position (well within a second).
 */
export class BuildingRegistry {
  private readonly runtimes = new Map<number, Promise<BuildingRuntime | undefined>>();
  /** The same runtimes once loaded, for synchronous readers on the fan-out path. */
  private readonly loaded = new Map<number, BuildingRuntime>();
  private readonly buildingsByOrganization = new Map<string, Promise<number[]>>();
  private readonly extensions: RuntimeExtension[] = [];

  constructor(
    private readonly storage: Storage,
    private readonly bus: Bus,
    private readonly logger?: Logger,
  ) {}

  async start(): Promise<void> {
    await this.bus.subscribe(CARTOGRAPHY_CHANNEL, (payload) => this.invalidate(payload as CartographyChange));
  }

  extend(extension: RuntimeExtension): void {
    this.extensions.push(extension);
  }

  invalidate(change: Pick<CartographyChange, 'organizationId' | 'buildingId' | 'kind'>): void {
    this.runtimes.delete(change.buildingId);
    this.loaded.delete(change.buildingId);
    if (change.kind === 'building') this.buildingsByOrganization.delete(change.organizationId);
  }

  /** The building if it exists and belongs to the organization. */
  async get(organizationId: string, buildingId: number): Promise<BuildingRuntime | undefined> {
    let runtime = this.runtimes.get(buildingId);
    if (!runtime) {
      runtime = this.load(buildingId);
      this.runtimes.set(buildingId, runtime);
      runtime.catch(() => this.runtimes.delete(buildingId));
    }
    const loaded = await runtime;
    return loaded && loaded.organizationId === organizationId ? loaded : undefined;
  }

  /** The runtime if it is already in memory (never loads). */
  peek(buildingId: number): BuildingRuntime | undefined {
    return this.loaded.get(buildingId);
  }

  /** The organization's building whose outline contains a point (outdoor fixes), if any. */
  async buildingAt(organizationId: string, point: LatLng): Promise<BuildingRuntime | undefined> {
    let ids = this.buildingsByOrganization.get(organizationId);
    if (!ids) {
      ids = this.storage
        .execute<{ id: number }>('select id from buildings where organization_id = ? order by id', [organizationId])
        .then((rows) => rows.map((row) => row.id));
      this.buildingsByOrganization.set(organizationId, ids);
      ids.catch(() => this.buildingsByOrganization.delete(organizationId));
    }
    for (const id of await ids) {
      const runtime = await this.get(organizationId, id);
      if (runtime && containsGeo(runtime.transform, { width: runtime.building.width, length: runtime.building.length }, point)) return runtime;
    }
    return undefined;
  }

  private async load(buildingId: number): Promise<BuildingRuntime | undefined> {
    const em = this.storage.em();
    const building = await em.findOne(BuildingSchema, { id: buildingId });
    if (!building) return undefined;
    const [floors, geofences, events] = await Promise.all([
      em.fork().find(FloorSchema, { buildingId }),
      em.fork().find(GeofenceSchema, { buildingId, deleted: false }),
      em.fork().find(EventSchema, { buildingId }),
    ]);
    const runtime: BuildingRuntime = {
      id: building.id,
      organizationId: (building.organization as { id: string }).id,
      building,
      transform: buildingTransform(building),
      floors: new Map(floors.map((floor) => [floor.id, { level: floor.level, levelHeight: floor.levelHeight }])),
      geofences,
      events,
      loadedAt: Date.now(),
    };
    for (const extension of this.extensions) extension(runtime);
    if (this.runtimes.has(buildingId)) this.loaded.set(buildingId, runtime);
    this.logger?.debug({ buildingId, geofences: geofences.length, events: events.length }, 'building runtime loaded');
    return runtime;
  }
}
