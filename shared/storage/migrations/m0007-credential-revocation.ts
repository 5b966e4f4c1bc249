import { Migration } from '@mikro-orm/migrations';

/**
 * Revocation and budgets. A user's credential version is bumped by a password or role change; every access
 * and refresh token records the version (and, when minted from an API key, the key) it came from, so a change
 * refuses them at once. A refresh chain dies with its key (cascade). Keys may override the deployment's rate
 * limits. Failed logins are counted by the expiring limiters now, so their unbounded table goes.
 */
export class M0007CredentialRevocation extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table users add column credential_version integer not null default 0`);
    this.addSql(`alter table api_keys
      add column requests_per_second integer null check (requests_per_second is null or requests_per_second > 0),
      add column poses_per_second integer null check (poses_per_second is null or poses_per_second > 0)`);
    this.addSql(`alter table refresh_tokens
      add column api_key_id uuid null references api_keys(id) on delete cascade,
      add column credential_version integer not null default 0`);
    this.addSql(`create index refresh_tokens_api_key_idx on refresh_tokens (api_key_id)`);
    this.addSql(`drop table if exists login_failures`);
  }
}
