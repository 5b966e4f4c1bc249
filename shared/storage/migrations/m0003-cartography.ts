import { Migration } from '@mikro-orm/migrations';

/**
 * Cartography: buildings, floors, POI categories, POIs, events, geofences/areas, the navigation graph and
 * the radio infrastructure. Integer ids where the spec has them (buildings, floors, POIs, events), UUIDs
 * for geofences. Every row carries its organization so every query can be scoped without a join.
 */
export class M0003Cartography extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table buildings (
      id serial primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      user_id uuid null references users(id) on delete set null,
      name text not null,
      description text null,
      info text null,
      location_lat double precision not null check (location_lat between -90 and 90),
      location_lng double precision not null check (location_lng between -180 and 180),
      width double precision not null check (width > 0),
      length double precision not null check (length > 0),
      rotation double precision not null default 0,
      custom_fields jsonb not null default '[]',
      picture_id uuid null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`);
    this.addSql(`create index buildings_organization_idx on buildings (organization_id)`);
    this.addSql(`create table floors (
      id serial primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      building_id integer not null references buildings(id) on delete cascade,
      name text not null default '',
      level integer not null,
      level_height double precision not null default 0,
      scale double precision null check (scale is null or scale > 0),
      map_id uuid null,
      custom_fields jsonb not null default '[]',
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (building_id, level)
    )`);
    this.addSql(`create table poi_categories (
      id serial primary key,
      organization_id uuid null references organizations(id) on delete cascade,
      name_en text not null,
      name_es text not null default '',
      code text not null,
      icon_id uuid null,
      selected_icon_id uuid null,
      public boolean not null default false,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`);
    this.addSql(
      `create unique index poi_categories_code_idx on poi_categories (coalesce(organization_id, '00000000-0000-0000-0000-000000000000'::uuid), code)`,
    );
    // Platform defaults: public, read-only, visible to every organization.
    this.addSql(`insert into poi_categories (organization_id, name_en, name_es, code, public) values
      (null, 'No category', 'Sin categoría', 'situm-default', true),
      (null, 'Entrance', 'Entrada', 'entrance', true),
      (null, 'Exit', 'Salida', 'exit', true),
      (null, 'Toilets', 'Aseos', 'toilets', true),
      (null, 'Elevator', 'Ascensor', 'elevator', true),
      (null, 'Stairs', 'Escaleras', 'stairs', true),
      (null, 'Information', 'Información', 'information', true),
      (null, 'First aid', 'Primeros auxilios', 'first-aid', true),
      (null, 'Emergency exit', 'Salida de emergencia', 'emergency-exit', true),
      (null, 'Parking', 'Aparcamiento', 'parking', true)`);
    this.addSql(`create table pois (
      id serial primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      building_id integer not null references buildings(id) on delete cascade,
      floor_id integer null references floors(id) on delete cascade,
      category_id integer null references poi_categories(id) on delete set null,
      indoor boolean not null,
      name text not null,
      info text not null default '',
      x double precision null,
      y double precision null,
      lat double precision not null check (lat between -90 and 90),
      lng double precision not null check (lng between -180 and 180),
      radius double precision not null default 0,
      custom_fields jsonb not null default '[]',
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      check (indoor = (floor_id is not null))
    )`);
    this.addSql(`create index pois_building_idx on pois (building_id)`);
    this.addSql(`create table events (
      id serial primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      building_id integer not null references buildings(id) on delete cascade,
      name text not null,
      info text not null default '',
      info_unsafe text not null default '',
      url text null,
      floor_id integer not null references floors(id) on delete cascade,
      x double precision not null,
      y double precision not null,
      lat double precision not null,
      lng double precision not null,
      radius double precision not null check (radius > 0),
      conversion jsonb null,
      custom_fields jsonb not null default '[]',
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`);
    this.addSql(`create index events_building_idx on events (building_id)`);
    this.addSql(`create table geofences (
      id uuid primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      building_id integer not null references buildings(id) on delete cascade,
      floor_id integer not null references floors(id) on delete cascade,
      name text not null,
      code text not null default '',
      description text null,
      info text null,
      type text not null check (type in ('POINT', 'LINE', 'POLYGON', 'CIRCLE')),
      geometric jsonb not null,
      cartesians jsonb not null,
      radius double precision null,
      max_stay_time integer null check (max_stay_time is null or max_stay_time > 0),
      min_dwell_s integer not null default 0 check (min_dwell_s >= 0),
      exit_grace_s integer not null default 0 check (exit_grace_s >= 0),
      custom_fields jsonb not null default '[]',
      deleted boolean not null default false,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`);
    this.addSql(`create index geofences_building_idx on geofences (building_id, deleted)`);
    this.addSql(`create index geofences_organization_idx on geofences (organization_id, deleted)`);
    this.addSql(`create table building_paths (
      building_id integer primary key references buildings(id) on delete cascade,
      organization_id uuid not null references organizations(id) on delete cascade,
      nodes jsonb not null default '[]',
      links jsonb not null default '[]',
      updated_at timestamptz not null default now()
    )`);
    this.addSql(`create table infrastructure (
      id serial primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      building_id integer not null references buildings(id) on delete cascade,
      floor_id integer not null references floors(id) on delete cascade,
      kind text not null check (kind in ('wifi', 'ble')),
      name text not null default '',
      bssid text null,
      ssid text null,
      uuid text null,
      major integer null check (major is null or major between 0 and 65535),
      minor integer null check (minor is null or minor between 0 and 65535),
      tx_power double precision null,
      x double precision not null,
      y double precision not null,
      lat double precision not null,
      lng double precision not null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      check ((kind = 'wifi') = (bssid is not null)),
      check ((kind = 'ble') = (uuid is not null and major is not null and minor is not null))
    )`);
    this.addSql(`create index infrastructure_building_idx on infrastructure (building_id)`);
  }
}
