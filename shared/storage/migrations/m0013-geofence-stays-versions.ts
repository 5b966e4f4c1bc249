import { Migration } from '@mikro-orm/migrations';

/**
 * A geofence report reads stay segments only where they were kept against the geofence's current geometry
 * version, and computes the device-hours holding a segment of an older one from positions (stays.ts). This index
 * finds those segments (version below the current one, from the hour the current geometry covers) without
 * reading every segment of the window, which a month is hundreds of thousands of.
 */
export class M0013GeofenceStaysVersions extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index geofence_stays_version_idx on geofence_stays (organization_id, fence_id, geometry_version, hour)`);
  }
}
