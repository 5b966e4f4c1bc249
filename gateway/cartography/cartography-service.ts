import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../../shared/logger.js';
import type { Bus, CartographyChange } from '../bus-channels.js';
import { NotFoundError, ValidationError, afterCommit } from '../../shared/errors.js';
import { createBuildingTransform, type BuildingTransform } from '../../shared/geo/building-transform.js';
import { BuildingSchema, FloorSchema, type Building, type Floor } from '../../shared/storage/entities/index.js';
import type { Principal } from '../auth/principal.js';

/** A building's placement as the geo module takes it: the one mapping from the entity's columns. */
export const buildingTransform = (building: Building): BuildingTransform =>
  createBuildingTransform({
    location: { lat: building.locationLat, lng: building.locationLng },
    dimensions: { width: building.width, length: building.length },
    rotation: building.rotation,
  });

/** Lookups every cartography route needs: buildings and floors in scope, the building's transform. */
export class CartographyService {
  private readonly transforms = new Map<number, { key: string; transform: BuildingTransform }>();

  constructor(
    private readonly bus: Bus,
    /** Where a failed announcement is logged (the change is committed by then). */
    private readonly logger: Logger,
  ) {}

  async building(em: EntityManager, principal: Principal, id: number, field?: string): Promise<Building> {
    const building = await em.findOne(BuildingSchema, { id, organization: principal.organizationId });
    if (building) return building;
    if (field) throw new ValidationError([{ field, message: 'no such building in your organization' }]);
    throw new NotFoundError('Building');
  }

  /** A floor that must belong to `building`: a floor of another building is the caller's mistake (422). */
  async floorOf(em: EntityManager, building: Building, floorId: number, field: string): Promise<Floor> {
    const floor = await em.findOne(FloorSchema, { id: floorId, buildingId: building.id });
    if (!floor) throw new ValidationError([{ field, message: `no floor ${floorId} in building ${building.id}` }]);
    return floor;
  }

  /** Cached per building version, so a request placing 2,000 POIs builds the transform once. */
  transformOf(building: Building): BuildingTransform {
    const key = `${building.locationLat},${building.locationLng},${building.width},${building.length},${building.rotation}`;
    const cached = this.transforms.get(building.id);
    if (cached && cached.key === key) return cached.transform;
    const transform = buildingTransform(building);
    if (this.transforms.size > 5000) this.transforms.clear();
    this.transforms.set(building.id, { key, transform });
    return transform;
  }

  /** Announces a change on the bus (every gateway, this one included). Called after the commit: never throws. */
  async announce(change: CartographyChange): Promise<void> {
    await afterCommit(this.logger, 'cartography announce', () => this.bus.publish('cartography:changed', change));
  }
}
