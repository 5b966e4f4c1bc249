import { Migration } from '@mikro-orm/migrations';

/**
 * One OPEN alarm per device, kind, geofence and subject user (review NH1). Without the user in the key, two people
 * who raised DANGER without a device shared one alarm: the second raiser read the first's, and moved its place.
 * The alarm service's upsert names the same expression as its conflict target.
 */
export class M0016AlarmSubjectKey extends Migration {
  override async up(): Promise<void> {
    this.addSql(`drop index if exists alarms_one_open_idx`);
    this.addSql(
      `create unique index alarms_one_open_idx on alarms (organization_id, type, coalesce(device_id, ''), coalesce(geofence_id, '00000000-0000-0000-0000-000000000000'::uuid), coalesce(user_id, '00000000-0000-0000-0000-000000000000'::uuid)) where state = 'OPEN'`,
    );
  }
}
