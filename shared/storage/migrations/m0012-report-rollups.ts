import { Migration } from '@mikro-orm/migrations';

/**
 * Report rollups (issue 18), rebuilt per device-hour from positions by shared/reports/rollups.ts.
 * `rollup_runs`: per device, building, floor, user and UTC quarter hour, the runs of positions whose
 * consecutive gaps are at most 5 s (first and last fix in µs since the epoch, and how many): visitors count
 * them, positioning_time joins them into sessions. `rollup_heat_cells`: per device, building, floor, indoor
 * flag, user and UTC hour, the positions in each geohash-10 grid cell. No primary key: a rebuild deletes a
 * device-hour's rows and inserts them again.
 */
export class M0012ReportRollups extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table rollup_runs (
      organization_id uuid not null,
      device_id text not null,
      quarter timestamptz not null,
      building_id integer not null,
      floor_id integer null,
      user_id uuid null,
      first_us bigint not null,
      last_us bigint not null,
      positions integer not null
    )`);
    this.addSql(`create index rollup_runs_building_idx on rollup_runs (organization_id, building_id, quarter)`);
    this.addSql(`create index rollup_runs_device_idx on rollup_runs (organization_id, device_id, quarter)`);
    this.addSql(`create table rollup_heat_cells (
      organization_id uuid not null,
      device_id text not null,
      hour timestamptz not null,
      building_id integer not null,
      floor_id integer null,
      indoor boolean not null,
      user_id uuid null,
      lat_cell integer not null,
      lng_cell integer not null,
      positions integer not null
    )`);
    this.addSql(`create index rollup_heat_cells_building_idx on rollup_heat_cells (organization_id, building_id, hour)`);
    this.addSql(`create index rollup_heat_cells_device_idx on rollup_heat_cells (organization_id, device_id, hour)`);
  }
}
