import { Migration } from '@mikro-orm/migrations';

/**
 * Detection dead letters (issue 26 item 3): an alarm or a batch's zone events the database refused for a reason
 * other than an outage, kept across restarts. The payload is plain jsonb and the organization plain text, with no
 * foreign key or check, so that keeping a refused item cannot be refused for the same reason. A gateway holds the
 * rows it retries through a lease (`claimed_by`, `claimed_until`), renewed while it lives and released when it
 * stops; a row whose lease ran out (its gateway died) is taken by the owner of its building.
 */
export class M0021DetectionDeadLetters extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table detection_dead_letters (
      id uuid primary key,
      organization_id text not null,
      building_id bigint null,
      kind text not null,
      payload jsonb not null,
      idempotency_key text null,
      first_error text not null,
      last_error text not null,
      attempts integer not null,
      retry_at timestamptz not null,
      claimed_by text null,
      claimed_until timestamptz null,
      created_at timestamptz not null default now()
    )`);
    this.addSql(`create index detection_dead_letters_claimed_until_idx on detection_dead_letters (claimed_until)`);
  }
}
