import { Migration } from '@mikro-orm/migrations';

/**
 * Each keyed raise records the alarm it went into and its own details. Raises of one device, kind and fence fold
 * into the OPEN alarm, which shows the last: a correction of event time (issue 30) that withdraws one raise must
 * leave the alarm standing, showing the one before, when others are folded in, and must know which those are.
 */
export class M0035AlarmRaiseRecords extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table alarm_raise_keys add column alarm_id uuid, add column details jsonb');
    this.addSql('create index alarm_raise_keys_alarm_idx on alarm_raise_keys (organization_id, alarm_id) where alarm_id is not null');
  }
}
