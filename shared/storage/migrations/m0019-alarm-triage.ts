import { Migration } from '@mikro-orm/migrations';

/**
 * Alarm triage (issue 27). Organizations get their alarm policy: how long an OPEN critical alarm may go
 * unconfirmed before it escalates, how many times it escalates at most, and whether closing any alarm (not only a
 * critical or high one) needs a comment. Alarms count their escalations and keep the time of the last one, and
 * `escalated` joins the kinds of alarm events. The partial index serves the escalation sweep, which reads only the
 * OPEN alarms of a few types.
 */
export class M0019AlarmTriage extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table organizations
      add column alarm_escalate_after_s integer not null default 60 check (alarm_escalate_after_s > 0),
      add column alarm_escalate_max integer not null default 3 check (alarm_escalate_max >= 0),
      add column alarm_comment_always boolean not null default false`);
    this.addSql(`alter table alarms
      add column escalations integer not null default 0,
      add column escalated_at timestamptz null`);
    this.addSql(`create index alarms_open_type_idx on alarms (type, created_at) where state = 'OPEN'`);
    this.addSql(`alter table alarm_events drop constraint alarm_events_kind_check`);
    this.addSql(`alter table alarm_events add constraint alarm_events_kind_check check (kind in ('raised', 'updated', 'state_changed', 'escalated'))`);
  }
}
