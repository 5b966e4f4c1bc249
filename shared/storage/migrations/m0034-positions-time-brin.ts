import { Migration } from '@mikro-orm/migrations';

/**
 * One BRIN index on positions for received_at and ts together (issue 33). m0011's BRIN index on received_at
 * serves the materializer's "received since"; what asks for a whole organization over a time range (a report of
 * every building, an evacuation's latest fixes, a person's export or erasure over a range) had only the building
 * btree, whose leading organization column made it read all of the organization's entries of those days. A
 * second BRIN index on ts would cost every stored fix one more index insert; one index summarising both columns
 * costs what m0011's did (a BRIN insert into a block range not yet summarised only finds that out).
 *
 * The btrees stay as m0005 made them, measured (bench/README.md, `positions-write`): the building index without
 * its organization column saved no measurable CPU per stored fix and lost the index-only scans of history pages
 * (the organization is checked on the heap); the device index must keep it, as device identifiers are the apps'
 * and may repeat between organizations.
 */
export class M0034PositionsTimeBrin extends Migration {
  override async up(): Promise<void> {
    this.addSql('drop index positions_received_idx');
    this.addSql('create index positions_received_ts_idx on positions using brin (received_at, ts)');
  }
}
