import { Migration } from '@mikro-orm/migrations';

/**
 * Mustering (issue 31). A geofence may be an assembly point (`muster_point`). An evacuation of a building is a
 * row of `evacuations`; at most one per building is active (`ended_at` null), which a partial unique index
 * holds even when two gateways declare at once. Its roll is one row per person (a user, or a device without
 * one), written as each status changes, so a restart or another gateway serves the same roll. Every change
 * takes the next `seq` (one sequence for all rolls): subscribers of `buildings/{id}/evacuation` resume with
 * `since_seq`, as they do for alarms.
 */
export class M0023Evacuations extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table geofences add column muster_point boolean not null default false`);
    this.addSql(`create table evacuations (
      id uuid primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      building_id integer not null,
      floor_ids jsonb null,
      note text null,
      drill boolean not null default false,
      started_at timestamptz not null,
      started_by jsonb not null,
      ended_at timestamptz null,
      ended_by jsonb null
    )`);
    this.addSql(`create unique index evacuations_one_active_idx on evacuations (building_id) where ended_at is null`);
    this.addSql(`create index evacuations_building_idx on evacuations (organization_id, building_id, started_at)`);
    this.addSql(`create sequence evacuation_roll_seq`);
    this.addSql(`create table evacuation_roll (
      evacuation_id uuid not null references evacuations(id) on delete cascade,
      person_key text not null,
      user_id uuid null,
      device_ids jsonb not null,
      arrival boolean not null default false,
      status text not null,
      status_at timestamptz not null,
      point_id uuid null,
      point_name text null,
      marked_by jsonb null,
      comment text null,
      floor_id integer null,
      x double precision null,
      y double precision null,
      lat double precision null,
      lng double precision null,
      fix_at timestamptz null,
      seq bigint not null default nextval('evacuation_roll_seq'),
      primary key (evacuation_id, person_key)
    )`);
    this.addSql(`create index evacuation_roll_seq_idx on evacuation_roll (evacuation_id, seq)`);
  }
}
