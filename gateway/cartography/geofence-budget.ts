import { ValidationError } from '../../shared/errors.js';
import type { EntityManager } from '@mikro-orm/postgresql';

export interface GeofenceBudget {
  /** Live geofences one building may hold. */
  maxPerBuilding: number;
  /** Vertices over all live geofences of one organization (what its detection costs per position grows with). */
  maxVerticesPerOrganization: number;
}

/**
 * Refuses (422) a geofence that would take its building past `maxPerBuilding` geofences, or its organization
 * past `maxVerticesPerOrganization` vertices, so that no tenant can make detection arbitrarily costly for the
 * shards it shares with others. `id`: the geofence being written (an update replaces its own vertices).
 */
export async function checkGeofenceBudget(
  em: EntityManager,
  budget: GeofenceBudget,
  fence: { id: string; organizationId: string; buildingId: number; vertices: number },
): Promise<void> {
  // Read in the write's own transaction (embedded storage has a single connection).
  const [row] = await em.execute<{ in_building: string | number; vertices: string | number }[]>(
    `select (select count(*) from geofences where building_id = ? and not deleted and id <> ?) as in_building,
            (select coalesce(sum(jsonb_array_length(cartesians)), 0) from geofences where organization_id = ? and not deleted and id <> ?) as vertices`,
    [fence.buildingId, fence.id, fence.organizationId, fence.id],
  );
  if (Number(row!.in_building) + 1 > budget.maxPerBuilding) {
    throw new ValidationError(
      [{ field: 'building_id', message: `a building holds at most ${budget.maxPerBuilding} geofences (GEOFENCES_MAX_PER_BUILDING)` }],
      'Too many geofences',
    );
  }
  if (Number(row!.vertices) + fence.vertices > budget.maxVerticesPerOrganization) {
    throw new ValidationError(
      [
        {
          field: 'cartesians',
          message: `an organization's geofences hold at most ${budget.maxVerticesPerOrganization} vertices in all (GEOFENCE_VERTICES_MAX_PER_ORGANIZATION); ${Number(row!.vertices)} are in use`,
        },
      ],
      'Too many geofence vertices',
    );
  }
}
