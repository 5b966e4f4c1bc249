import type { EntityManager } from '@mikro-orm/postgresql';
import { typesOfSeverity } from '../../shared/detection/alarm-severity.js';
import type { Storage } from '../../shared/storage/index.js';
import type { AlarmEventMessage, AlarmHistoryEntry } from './alarm-event-message.js';
import type { AlarmRow, AlarmService } from './alarm-service.js';

/** Due alarms escalated per sweep at most: the rest wait for the next sweep, a second later. */
const ESCALATIONS_PER_SWEEP = 500;

/** The alarm changed (confirmed, closed, escalated by another gateway) since it was found due: nothing to do. */
class NoLongerDue extends Error {}

const CRITICAL = typesOfSeverity('critical');

/**
 * When an OPEN critical alarm next escalates under its organization's policy (`a` the alarm, `o` its
 * organization): escalate_after_s after it was raised or last escalated, never once it escalated escalate_max times.
 */
const NEXT_ESCALATION = `case when a.escalations >= o.alarm_escalate_max then 'infinity'::timestamptz
  else coalesce(a.escalated_at, a.created_at) + make_interval(secs => o.alarm_escalate_after_s) end`;

/**
 * Escalation of critical alarms nobody confirmed (issue 27). Run by the detection sweep with the sweep's clock:
 * an OPEN critical alarm escalates once `escalate_after_s` (the organization's) has passed since it was raised,
 * then again each `escalate_after_s` after its last escalation, `escalate_max` times at most. Any state change
 * (confirmed, closed...) stops it, since only OPEN alarms are due.
 *
 * Each alarm carries when it is next due (`escalate_at`), set by the sweep for alarms raised since the last one
 * and after each escalation, so a sweep reads only what is new or due, not every OPEN alarm. A change of policy
 * clears the schedule of the organization's OPEN alarms (`reschedule`), and the next sweep sets it again.
 *
 * An escalation is an alarm event like any other: the next seq, an `escalated` entry on the alarm's history, an
 * alarm_events row and the webhook `alarm.escalated` in one transaction, then an `alarm` frame with event
 * `escalated`. It is conditional on the alarm being as found (OPEN, the same count of escalations), so gateways
 * that both see an alarm of no building (owned by all) escalate it once.
 */
export class AlarmEscalation {
  constructor(
    private readonly storage: Storage,
    private readonly alarms: AlarmService,
  ) {}

  /** Escalates the due alarms of the buildings `owns` says are this gateway's; resolves to how many it escalated. */
  async sweep(now: number, owns: (buildingId: number | null) => boolean): Promise<number> {
    await this.storage.execute(
      `update alarms a set escalate_at = ${NEXT_ESCALATION} from organizations o
       where o.id = a.organization_id and a.state = 'OPEN' and a.escalate_at is null and a.type in (${CRITICAL.map(() => '?').join(', ')})`,
      CRITICAL,
    );
    const due = await this.storage.execute<{ id: string; organization_id: string; building_id: number | null; escalations: number }>(
      `select id, organization_id, building_id, escalations from alarms where state = 'OPEN' and escalate_at <= ? order by escalate_at limit ?`,
      [new Date(now), ESCALATIONS_PER_SWEEP],
    );
    const messages: AlarmEventMessage[] = [];
    try {
      for (const alarm of due) {
        if (!owns(alarm.building_id)) continue;
        const message = await this.escalate(alarm, now);
        if (message) messages.push(message);
      }
    } finally {
      await this.alarms.announce(messages);
    }
    return messages.length;
  }

  /** After the organization's policy changed, in its transaction: its OPEN alarms are scheduled again by the next sweep. */
  static async reschedule(tx: EntityManager, organizationId: string): Promise<void> {
    await tx.execute(`update alarms set escalate_at = null where organization_id = ? and state = 'OPEN' and escalate_at is not null`, [
      organizationId,
    ]);
  }

  private async escalate(
    alarm: { id: string; organization_id: string; escalations: number },
    now: number,
  ): Promise<AlarmEventMessage | undefined> {
    const at = new Date(now);
    const entry: AlarmHistoryEntry = { state: 'OPEN', from: 'OPEN', at: at.toISOString(), by: 'system', comment: null, event: 'escalated' };
    try {
      return await this.storage.em().transactional(async (tx) => {
        // The seq first, as every alarm write takes it: its row lock orders this after a concurrent confirm.
        const seq = await this.alarms.nextSeq(tx, alarm.organization_id);
        const [row] = await tx.execute<AlarmRow[]>(
          `update alarms a set escalations = a.escalations + 1, escalated_at = ?, seq = ?, updated_at = ?, history = a.history || ?::jsonb,
             escalate_at = case when a.escalations + 1 >= o.alarm_escalate_max then 'infinity'::timestamptz else ?::timestamptz + make_interval(secs => o.alarm_escalate_after_s) end
           from organizations o
           where o.id = a.organization_id and a.id = ? and a.state = 'OPEN' and a.escalations = ? returning a.*`,
          [at, seq, at, JSON.stringify([entry]), at, alarm.id, alarm.escalations],
        );
        if (!row) throw new NoLongerDue(); // rolls the seq back too: no gap in the organization's stream
        return this.alarms.recordEvent(tx, row, 'escalated');
      });
    } catch (error) {
      if (error instanceof NoLongerDue) return undefined;
      throw error;
    }
  }
}
