import { containsGeo, type BuildingTransform, type LatLng } from '../../shared/geo/building-transform.js';
import type { Logger } from '../../shared/logger.js';
import { LruCache, type CacheStats } from '../../shared/lru-cache.js';
import type { Storage } from '../../shared/storage/index.js';
import {
  BuildingSchema,
  EventSchema,
  FloorSchema,
  GeofenceSchema,
  type Building,
  type CartographyEvent,
  type Geofence,
} from '../../shared/storage/entities/index.js';
import type { Bus, CartographyChange } from '../bus-channels.js';
import { buildingTransform } from '../cartography/cartography-service.js';

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

export interface BuildingRegistryOptions {
  /** Age past which a loaded building is re-read in the background (a backstop should a bus message be lost). */
  ttlMs?: number;
  /** Buildings kept in memory; the least recently used beyond this are dropped (and re-read on use). */
  maxBuildings?: number;
  /** Building ids found not to exist, remembered so a client repeating one costs no query; bounded. */
  maxAbsent?: number;
  now?: () => number;
}

export interface BuildingRegistryStats {
  loaded: CacheStats;
  absent: CacheStats;
  organizations: CacheStats;
  loading: number;
}

/**
 * Per-building runtime state, loaded on first use and dropped when the bus announces a change to that
 * building, so every gateway sees new cartography on its next position (well within a second). Should that
 * message be lost (a Redis restart), the bus's resync signal drops everything, and a runtime older than
 * `ttlMs` is re-read in the background anyway; the old one keeps serving until the new one is ready, so the
 * detectors' sweeps (which only peek) never find a building missing.
 */
export class BuildingRegistry {
  /** Loaded runtimes, for synchronous readers on the fan-out path too. */
  private readonly loaded: LruCache<number, BuildingRuntime>;
  /** Ids that do not exist; a client may send any number of them, hence bounded and short-lived. */
  private readonly absent: LruCache<number, true>;
  /** Loads in flight; an invalidation removes the entry so that a load that started before it is not kept. */
  private readonly loading = new Map<number, Promise<BuildingRuntime | undefined>>();
  private readonly buildingsByOrganization: LruCache<string, Promise<number[]>>;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(
    private readonly storage: Storage,
    private readonly bus: Bus,
    private readonly logger?: Logger,
    options: BuildingRegistryOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 60_000;
    this.now = options.now ?? Date.now;
    this.loaded = new LruCache({ maxEntries: options.maxBuildings ?? 10_000, now: this.now });
    this.absent = new LruCache({ maxEntries: options.maxAbsent ?? 10_000, ttlMs: this.ttlMs, now: this.now });
    this.buildingsByOrganization = new LruCache({ maxEntries: 10_000, ttlMs: this.ttlMs, now: this.now });
  }

  async start(): Promise<void> {
    await this.bus.subscribe('cartography:changed', (change) => this.invalidate(change));
    this.bus.onResync(() => this.clear());
  }

  invalidate(change: Pick<CartographyChange, 'organizationId' | 'buildingId' | 'kind'>): void {
    this.loading.delete(change.buildingId);
    this.loaded.delete(change.buildingId);
    this.absent.delete(change.buildingId);
    if (change.kind === 'building') this.buildingsByOrganization.delete(change.organizationId);
  }

  /** Forgets everything: the bus may have lost invalidations. */
  clear(): void {
    this.loading.clear();
    this.loaded.clear();
    this.absent.clear();
    this.buildingsByOrganization.clear();
  }

  stats(): BuildingRegistryStats {
    return {
      loaded: this.loaded.stats(),
      absent: this.absent.stats(),
      organizations: this.buildingsByOrganization.stats(),
      loading: this.loading.size,
    };
  }

  /** The building if it exists and belongs to the organization. */
  async get(organizationId: string, buildingId: number): Promise<BuildingRuntime | undefined> {
    let runtime = this.current(buildingId);
    if (!runtime && !this.absent.has(buildingId)) runtime = await (this.loading.get(buildingId) ?? this.fetch(buildingId));
    return runtime && runtime.organizationId === organizationId ? runtime : undefined;
  }

  /** The runtime if it is already in memory (never waits for a load). */
  peek(buildingId: number): BuildingRuntime | undefined {
    return this.current(buildingId);
  }

  /** The loaded runtime, re-read in the background once older than the TTL. */
  private current(buildingId: number): BuildingRuntime | undefined {
    const runtime = this.loaded.get(buildingId);
    if (runtime && this.now() - runtime.loadedAt >= this.ttlMs && !this.loading.has(buildingId)) {
      this.fetch(buildingId).catch((error) => this.logger?.warn({ err: error, buildingId }, 'building refresh failed'));
    }
    return runtime;
  }

  private fetch(buildingId: number): Promise<BuildingRuntime | undefined> {
    const promise = this.load(buildingId).then(
      (runtime) => {
        // Invalidated while loading: the caller gets this copy, the cache does not keep it.
        if (this.loading.get(buildingId) !== promise) return runtime;
        this.loading.delete(buildingId);
        if (runtime) this.loaded.set(buildingId, runtime);
        else {
          this.loaded.delete(buildingId);
          this.absent.set(buildingId, true);
        }
        return runtime;
      },
      (error: unknown) => {
        if (this.loading.get(buildingId) === promise) this.loading.delete(buildingId);
        throw error;
      },
    );
    this.loading.set(buildingId, promise);
    return promise;
  }

  /** The organization's building whose outline contains a point (outdoor fixes), if any. */
  async buildingAt(organizationId: string, point: LatLng): Promise<BuildingRuntime | undefined> {
    let ids = this.buildingsByOrganization.get(organizationId);
    if (!ids) {
      const query = this.storage
        .execute<{ id: number }>('select id from buildings where organization_id = ? order by id', [organizationId])
        .then((rows) => rows.map((row) => row.id));
      this.buildingsByOrganization.set(organizationId, query);
      query.catch(() => {
        if (this.buildingsByOrganization.peek(organizationId) === query) this.buildingsByOrganization.delete(organizationId);
      });
      ids = query;
    }
    for (const id of await ids) {
      const runtime = await this.get(organizationId, id);
      if (runtime && containsGeo(runtime.transform, { width: runtime.building.width, length: runtime.building.length }, point))
        return runtime;
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
      loadedAt: this.now(),
    };
    this.logger?.debug({ buildingId, geofences: geofences.length, events: events.length }, 'building runtime loaded');
    return runtime;
  }
}
