import { Migration } from '@mikro-orm/migrations';

/**
 * Silence storms and restored contact.
 * - A building's storm thresholds: when more than `storm_share` of its recently active devices (and at least
 *   `storm_min_devices`) fall silent within one silence window, one BUILDING_SILENT alarm stands for them all
 *   (null: the defaults, 0.5 and 5).
 * - An organization may have an OPEN DEADMAN closed when its device reports again (`deadman_auto_close`).
 * - One OPEN alarm per building for alarms without a device (BUILDING_SILENT): the one-open index keys a
 *   deviceless alarm with no subject user by its building, so two buildings' storms are two alarms (a person's
 *   hand-raised alarm stays theirs wherever they raise it again); the subject user stays in the key
 *   (m0016: two people's hand-raised alarms are never one).
 */
export class M0018SilenceStormsAndContact extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table buildings
      add column storm_share double precision null check (storm_share is null or (storm_share >= 0 and storm_share <= 1)),
      add column storm_min_devices integer null check (storm_min_devices is null or storm_min_devices >= 0)`);
    this.addSql(`alter table organizations add column deadman_auto_close boolean not null default false`);
    this.addSql(`drop index alarms_one_open_idx`);
    this.addSql(
      `create unique index alarms_one_open_idx on alarms (organization_id, type, coalesce(device_id, case when user_id is null then 'building:' || building_id::text end, ''), coalesce(geofence_id, '00000000-0000-0000-0000-000000000000'::uuid), coalesce(user_id, '00000000-0000-0000-0000-000000000000'::uuid)) where state = 'OPEN'`,
    );
  }
}
