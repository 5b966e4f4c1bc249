import { Migration } from '@mikro-orm/migrations';

/**
 * Alarm triage (issue 27). Organizations get their alarm policy: how long an OPEN critical alarm may go
 * unconfirmed before it escalates, how many times it escalates at most, and whether closing any alarm (not only a
 * critical or high one) needs a comment. Alarms count their escalations, keep the time of the last one and when
 * the next is due (`escalate_at`: null until the sweep schedules an OPEN critical alarm, 'infinity' once it
 * escalated its last time), and `escalated` joins the kinds of alarm events. The two partial indexes let the
 * once-a-second sweep read only the alarms it has to schedule or escalate, not every OPEN one.
 */
export class M0019AlarmTriage extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table organizations
      add column alarm_escalate_after_s integer not null default 60 check (alarm_escalate_after_s > 0),
      add column alarm_escalate_max integer not null default 3 check (alarm_escalate_max >= 0),
      add column alarm_comment_always boolean not null default false`);
    this.addSql(`alter table alarms
      add column escalations integer not null default 0,
      add column escalated_at timestamptz null,
      add column escalate_at timestamptz null`);
    this.addSql(`create index alarms_unscheduled_idx on alarms (type) where state = 'OPEN' and escalate_at is null`);
    this.addSql(`create index alarms_escalate_at_idx on alarms (escalate_at) where state = 'OPEN'`);
    this.addSql(`alter table alarm_events drop constraint alarm_events_kind_check`);
    this.addSql(
      `alter table alarm_events add constraint alarm_events_kind_check check (kind in ('raised', 'updated', 'state_changed', 'escalated'))`,
    );
  }
}
