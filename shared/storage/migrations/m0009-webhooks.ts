import { Migration } from '@mikro-orm/migrations';

/**
 * Outbound webhooks and their deliveries. A delivery row is the durable record of one event owed to one
 * webhook: the job queue only wakes it up, so a restart (or a lost job) never loses an event; `seq` orders a
 * webhook's deliveries, `delivering_until` is the lease that keeps one attempt per webhook in flight, and
 * `(webhook_id, event_key)` collapses the same event enqueued twice.
 */
export class M0009Webhooks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table webhooks (
      id uuid primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      url text not null,
      events jsonb not null,
      building_ids jsonb,
      description text not null default '',
      secret text not null,
      delivering_until timestamptz,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`);
    this.addSql(`create index webhooks_organization_idx on webhooks (organization_id)`);
    this.addSql(`create table webhook_deliveries (
      id uuid primary key,
      seq bigserial not null,
      webhook_id uuid not null references webhooks(id) on delete cascade,
      organization_id uuid not null,
      event_key text not null,
      event_type text not null,
      payload text not null,
      status text not null default 'pending' check (status in ('pending', 'succeeded', 'dead')),
      attempts integer not null default 0,
      last_response_code integer,
      last_error text,
      next_attempt_at timestamptz not null default now(),
      job_token uuid,
      attempt_log jsonb not null default '[]'::jsonb,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (webhook_id, event_key)
    )`);
    this.addSql(`create index webhook_deliveries_pending_idx on webhook_deliveries (webhook_id, seq) where status = 'pending'`);
    this.addSql(`create index webhook_deliveries_list_idx on webhook_deliveries (webhook_id, seq desc)`);
  }
}
