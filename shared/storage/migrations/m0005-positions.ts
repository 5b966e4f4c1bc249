import { Migration } from '@mikro-orm/migrations';

/**
 * Positions: one row per fix, partitioned by day (UTC) so history scans touch only the days asked for and
 * retention drops whole partitions. Partitions are created on demand by the writer (see position-store.ts).
 * No primary key: a fix is identified by (organization, device, ts) and never updated.
 */
export class M0005Positions extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table positions (
      organization_id uuid not null,
      device_id text not null,
      user_id uuid null,
      building_id integer null,
      floor_id integer null,
      indoor boolean not null,
      x double precision null,
      y double precision null,
      lat double precision not null,
      lng double precision not null,
      yaw double precision not null default 0,
      accuracy double precision null,
      ts timestamptz not null,
      received_at timestamptz not null default now()
    ) partition by range (ts)`);
    this.addSql(`create index positions_building_ts_idx on positions (organization_id, building_id, ts)`);
    this.addSql(`create index positions_device_ts_idx on positions (organization_id, device_id, ts)`);
  }
}
