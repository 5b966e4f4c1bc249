import { Migration } from '@mikro-orm/migrations';

/**
 * A refresh-token family revoked as a whole (a used token presented again): every row of the chain records
 * when, so the access tokens minted from it (which carry the family id, `fid`) are refused too, not only its
 * refresh tokens. A rotation sets only `revoked_at` on the token it consumes; the family lives on.
 */
export class M0022RefreshFamilyRevocation extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table refresh_tokens add column family_revoked_at timestamptz null`);
  }
}
