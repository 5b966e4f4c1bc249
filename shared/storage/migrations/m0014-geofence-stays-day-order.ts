import { Migration } from '@mikro-orm/migrations';

/**
 * A geofence report joins stay segments per device and geofence in time order (stays.ts, sessionsSql). This index
 * yields a UTC day's segments of an organization in that order, with every column the report reads, so a month
 * is read as one ordered stream per day merged (a merge append) instead of sorting hundreds of thousands of
 * segments. The day leads so that a window reads only its own days, however long the history kept.
 */
export class M0014GeofenceStaysDayOrder extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create index geofence_stays_day_order_idx on geofence_stays (organization_id, ((hour at time zone 'UTC')::date), device_id collate "C", fence_id, first_ts, last_ts) include (hour, geometry_version, building_id, user_id, positions)`,
    );
  }
}
