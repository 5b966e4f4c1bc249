import { Migration } from '@mikro-orm/migrations';

/**
 * The audit log: one row per successful write through the API, inserted in the write's own transaction (a
 * rolled-back write leaves none). `changes` holds the before/after of the changed fields, secrets redacted.
 */
export class M0010AuditLog extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table audit_log (
      id bigserial primary key,
      organization_id uuid not null references organizations(id) on delete cascade,
      at timestamptz not null default clock_timestamp(),
      user_id uuid,
      user_email text,
      via text not null,
      api_key_id uuid,
      method text not null,
      route text not null,
      object_type text not null,
      object_id text,
      changes jsonb not null,
      address text
    )`);
    this.addSql(`create index audit_log_organization_idx on audit_log (organization_id, id desc)`);
    this.addSql(`create index audit_log_object_idx on audit_log (organization_id, object_type, object_id)`);
    this.addSql(`create index audit_log_user_idx on audit_log (organization_id, user_id)`);
    this.addSql(`create index audit_log_at_idx on audit_log (at)`);
  }
}
