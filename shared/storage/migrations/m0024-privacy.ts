import { Migration } from '@mikro-orm/migrations';

/**
 * Privacy (issue 32). `tracking_windows`: the schedule (shared/privacy/tracking-schedule.ts) of one user or one
 * group, never both; a user's own overrides their group's. `erasure_requests`: one erasure of a person's history,
 * its range and what it removed so far; the durable record an erasure job resumes from after a restart.
 */
export class M0024Privacy extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table tracking_windows (
      organization_id uuid not null references organizations(id) on delete cascade,
      user_id uuid null references users(id) on delete cascade,
      group_id uuid null references groups(id) on delete cascade,
      schedule jsonb not null,
      updated_at timestamptz not null default now(),
      check ((user_id is null) <> (group_id is null))
    )`);
    this.addSql(`create unique index tracking_windows_user_idx on tracking_windows (user_id) where user_id is not null`);
    this.addSql(`create unique index tracking_windows_group_idx on tracking_windows (group_id) where group_id is not null`);
    this.addSql(`create table erasure_requests (
      id uuid primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      user_id uuid not null,
      from_ts timestamptz null,
      to_ts timestamptz null,
      status text not null check (status in ('queued', 'running', 'done')),
      removed jsonb not null default '{}',
      requested_by uuid null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      finished_at timestamptz null
    )`);
    this.addSql(`create index erasure_requests_unfinished_idx on erasure_requests (status) where status <> 'done'`);
  }
}
