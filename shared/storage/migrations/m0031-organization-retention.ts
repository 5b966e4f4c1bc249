import { Migration } from '@mikro-orm/migrations';

/**
 * Retention per organization (issue 32): days each kind of data is kept, within the deployment's maximum
 * (shared/privacy/retention.ts); null keeps it for the deployment's maximum. `erasure_requests.cause` tells an
 * erasure an administrator asked from the one that deleting the user started.
 */
export class M0031OrganizationRetention extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table organizations
      add column positions_retention_days integer null check (positions_retention_days > 0),
      add column zone_events_retention_days integer null check (zone_events_retention_days > 0),
      add column stays_retention_days integer null check (stays_retention_days > 0),
      add column alarm_positions_retention_days integer null check (alarm_positions_retention_days > 0),
      add column audit_retention_days integer null check (audit_retention_days > 0)`);
    this.addSql(
      `alter table erasure_requests add column cause text not null default 'request' check (cause in ('request', 'user_deleted'))`,
    );
    this.addSql(`create index erasure_requests_user_idx on erasure_requests (organization_id, user_id, created_at)`);
  }
}
