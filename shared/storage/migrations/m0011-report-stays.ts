import { Migration } from '@mikro-orm/migrations';

/**
 * Reports kept as positions arrive (issue 18). `positions_received_idx`: a BRIN index on received_at, which
 * rows arrive in order of, so the materializer finds what arrived since its watermark without scanning a day
 * (and ingest pays next to nothing for it). `report_watermarks`: rows received before the watermark are
 * materialised; it starts at -infinity, so the first pass also builds what was stored before this migration.
 * `geofence_stays`: runs of a device in a geofence within one UTC hour (see shared/reports/stays.ts).
 * Geofences carry the version of their geometry and the time it took effect: stays are computed against one
 * version, and a report reads them only where that version was in effect.
 */
export class M0011ReportStays extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index positions_received_idx on positions using brin (received_at)`);
    this.addSql(`create table report_watermarks (
      name text primary key,
      watermark timestamptz not null
    )`);
    this.addSql(`insert into report_watermarks (name, watermark) values ('reports', '-infinity')`);
    this.addSql(`alter table geofences add column geometry_version integer not null default 1`);
    this.addSql(`alter table geofences add column geometry_since timestamptz null`);
    this.addSql(`update geofences set geometry_since = created_at`);
    this.addSql(`alter table geofences alter column geometry_since set not null`);
    this.addSql(`alter table geofences alter column geometry_since set default now()`);
    this.addSql(`create table geofence_stays (
      organization_id uuid not null,
      device_id text not null,
      hour timestamptz not null,
      fence_id uuid not null,
      geometry_version integer not null,
      user_id uuid null,
      building_id integer null,
      first_ts timestamptz not null,
      last_ts timestamptz not null,
      positions integer not null
    )`);
    this.addSql(`create index geofence_stays_hour_idx on geofence_stays (organization_id, hour, device_id)`);
  }
}
