import { Migration } from '@mikro-orm/migrations';

/** Identity and access: groups, devices, API keys, refresh tokens, the failed-login log. */
export class M0002Identity extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table groups (
      id uuid primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      name text not null,
      description text not null default '',
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (organization_id, name)
    )`);
    this.addSql(`alter table users
      add column group_id uuid null references groups(id) on delete set null,
      add column code text null,
      add column locale text null,
      add column info text null,
      add column building_ids integer[] not null default '{}'`);
    this.addSql(`create index users_group_idx on users (group_id)`);
    this.addSql(`create table devices (
      id uuid primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      identifier text not null,
      name text not null default '',
      user_id uuid null references users(id) on delete set null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (organization_id, identifier)
    )`);
    this.addSql(`create index devices_user_idx on devices (user_id)`);
    this.addSql(`create table api_keys (
      id uuid primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      user_id uuid not null references users(id) on delete cascade,
      key_hash text not null unique,
      key_hint text not null,
      permission text not null check (permission in ('read-only', 'read-write', 'positioning')),
      description text not null default '',
      created_at timestamptz not null default now(),
      last_used_at timestamptz null
    )`);
    this.addSql(`create index api_keys_user_idx on api_keys (user_id)`);
    this.addSql(`create table refresh_tokens (
      id uuid primary key,
      user_id uuid not null references users(id) on delete cascade,
      token_hash text not null unique,
      permission text not null,
      expires_at timestamptz not null,
      created_at timestamptz not null default now(),
      revoked_at timestamptz null
    )`);
    this.addSql(`create index refresh_tokens_user_idx on refresh_tokens (user_id)`);
    this.addSql(`create table login_failures (
      email text not null,
      failed_at timestamptz not null default now()
    )`);
    this.addSql(`create index login_failures_email_idx on login_failures (email, failed_at)`);
  }
}
