import { Migration } from '@mikro-orm/migrations';

/**
 * Refresh-token families: every token of one sign-in's rotation chain carries the id of the chain's first
 * token, so presenting a token that was already used (a stolen copy, or the thief's after the owner rotated)
 * revokes the whole chain at once. Tokens issued before this migration form a family of their own.
 */
export class M0020RefreshTokenFamilies extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table refresh_tokens add column family_id uuid null`);
    this.addSql(`create index refresh_tokens_family_idx on refresh_tokens (family_id)`);
  }
}
