import { Migration } from '@mikro-orm/migrations';

/**
 * Two access fixes of issue 28.
 *
 * L6: a refresh-token family revoked as a whole (a used token presented again): every row of the chain records
 * when, so the access tokens minted from it (which carry the family id, `fid`) are refused too, not only its
 * refresh tokens. A rotation sets only `revoked_at` on the token it consumes; the family lives on.
 *
 * L1: an e-mail is unique within its organization, no longer across all of them, so creating a user tells an
 * organization nothing about the others. Sign-in by e-mail and password picks the one account whose password
 * matches (gateway/auth/credential-service.ts).
 */
export class M0022TokenFamiliesAndOrganizationEmails extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table refresh_tokens add column family_revoked_at timestamptz null`);
    this.addSql(`alter table users drop constraint users_email_key`);
    this.addSql(`create unique index users_organization_email_key on users (organization_id, email)`);
    this.addSql(`create index users_email_idx on users (email)`);
  }
}
