import { Migration } from '@mikro-orm/migrations';

/**
 * Detection and alarms. Alarms take a per-organization sequence number in the same transaction that writes
 * them (a row lock on alarm_sequences), so commit order equals seq order and a subscriber can replay
 * "everything after N" from alarm_events with no gap. One OPEN alarm per device, kind and geofence is
 * enforced by a partial unique index.
 */
export class M0006DetectionAndAlarms extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table buildings
      add column deadman_after_s integer null check (deadman_after_s is null or deadman_after_s > 0),
      add column deadman_radius_m double precision null check (deadman_radius_m is null or deadman_radius_m > 0),
      add column deadman_silence_s integer null check (deadman_silence_s is null or deadman_silence_s > 0)`);
    this.addSql(`create table zone_events (
      organization_id uuid not null,
      building_id integer not null,
      floor_id integer null,
      zone_kind text not null check (zone_kind in ('geofence', 'event', 'conversion')),
      zone_id text not null,
      device_id text not null,
      user_id uuid null,
      type text not null check (type in ('enter', 'exit')),
      at timestamptz not null,
      fired_at timestamptz not null
    )`);
    this.addSql(`create index zone_events_zone_idx on zone_events (organization_id, zone_kind, zone_id, at)`);
    this.addSql(`create index zone_events_building_idx on zone_events (organization_id, building_id, at)`);
    this.addSql(`create table alarm_sequences (
      organization_id uuid primary key references organizations(id) on delete cascade,
      last_seq bigint not null default 0
    )`);
    this.addSql(`create table alarms (
      id uuid primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      seq bigint not null,
      type text not null,
      state text not null check (state in ('OPEN', 'CLOSED', 'CONFIRMED', 'MARKED_FALSE', 'OTHER')),
      building_id integer null,
      floor_id integer null,
      device_id text null,
      user_id uuid null,
      geofence_id uuid null,
      x double precision null,
      y double precision null,
      lat double precision null,
      lng double precision null,
      details jsonb not null default '{}',
      occurrences integer not null default 1,
      history jsonb not null default '[]',
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`);
    this.addSql(
      `create unique index alarms_one_open_idx on alarms (organization_id, type, coalesce(device_id, ''), coalesce(geofence_id, '00000000-0000-0000-0000-000000000000'::uuid)) where state = 'OPEN'`,
    );
    this.addSql(`create index alarms_organization_idx on alarms (organization_id, created_at desc)`);
    this.addSql(`create table alarm_events (
      organization_id uuid not null references organizations(id) on delete cascade,
      seq bigint not null,
      alarm_id uuid not null references alarms(id) on delete cascade,
      kind text not null check (kind in ('raised', 'updated', 'state_changed')),
      building_id integer null,
      alarm jsonb not null,
      created_at timestamptz not null default now(),
      primary key (organization_id, seq)
    )`);
  }
}
