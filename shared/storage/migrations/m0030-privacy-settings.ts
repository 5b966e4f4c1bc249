import { Migration } from '@mikro-orm/migrations';

/**
 * Privacy settings of an organization (issue 32): `reports_pseudonymous` makes every report pseudonymous
 * (shared/reports/pseudonymize.ts) for everyone but the organization's admins. Numbered m0030: m0025..m0029 are
 * another change's.
 */
export class M0030PrivacySettings extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table organizations add column reports_pseudonymous boolean not null default false`);
  }
}
