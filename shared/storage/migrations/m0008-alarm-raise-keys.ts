import { Migration } from '@mikro-orm/migrations';

/**
 * Idempotency keys of alarm raises. Detectors name each condition they raise (a stay, a silence, a pose's button
 * press); the key is inserted in the raise's transaction, so an alarm retried after a database outage, or after
 * an answer lost with its connection, is stored exactly once.
 */
export class M0008AlarmRaiseKeys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table alarm_raise_keys (
      organization_id uuid not null references organizations(id) on delete cascade,
      key text not null,
      created_at timestamptz not null default now(),
      primary key (organization_id, key)
    )`);
    this.addSql(`create index alarm_raise_keys_created_idx on alarm_raise_keys (created_at)`);
  }
}
