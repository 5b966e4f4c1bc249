import { Migration } from '@mikro-orm/migrations';

/** The foundation: organizations and their users (the first admin is created at boot). */
export class M0001OrganizationsAndUsers extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table organizations (
      id uuid primary key,
      name text not null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`);
    this.addSql(`create table users (
      id uuid primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      email text not null unique check (email = lower(email)),
      password_hash text not null,
      full_name text not null default '',
      role text not null check (role in ('admin', 'user_manager', 'user')),
      platform_admin boolean not null default false,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`);
    this.addSql(`create index users_organization_idx on users (organization_id)`);
  }
}
