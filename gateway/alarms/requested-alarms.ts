import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { PositionBatch } from '../pipeline/position-batch.js';
import type { RequestedAlarmRaiser } from '../pipeline/ports.js';
import type { AlarmButton, ButtonType, FoldedPress } from './alarm-button.js';
import type { AlarmService } from './alarm-service.js';

type Folded = FoldedPress & { first: number; last: PositionRecord };

/**
 * The alarm buttons of a batch: each device's presses of each button fold into one raise counting them all (one
 * alarm write, whatever the number of poses), then `button` decides which raise an alarm event and which, repeats
 * within its debounce, only add occurrences; past the caller's budget the upload is refused before any write.
 */
export class RequestedAlarms implements RequestedAlarmRaiser {
  constructor(
    private readonly alarms: AlarmService,
    /** Debounce and budget of the alarm buttons poses carry. */
    private readonly button: AlarmButton,
    /** DETECTION_REORDER_WINDOW_SECONDS in ms: a press that reaches us later than this after it was made is flagged late. */
    private readonly reorderWindowMs = 2000,
  ) {}

  async raise(batch: PositionBatch): Promise<void> {
    const by = { user_id: batch.principal.userId, email: batch.principal.email };
    const folded = new Map<string, Folded>();
    for (const [index, pose] of batch.poses.entries()) {
      const types: ButtonType[] = [];
      if (pose.danger) types.push('DANGER');
      if (pose.assistance_request) types.push('ASSISTANCE_REQUEST');
      const record = batch.records[index]!;
      for (const type of types) {
        const key = `${record.deviceId}|${type}`;
        const press = folded.get(key);
        if (!press) {
          const { organizationId, deviceId, timestamp } = record;
          folded.set(key, { organizationId, deviceId, type, presses: 1, first: timestamp, last: record });
        } else {
          press.presses++;
          press.first = Math.min(press.first, record.timestamp);
          if (record.timestamp >= press.last.timestamp) press.last = record;
        }
      }
    }
    if (folded.size === 0) return;
    const credential = batch.principal.apiKeyId ? `key:${batch.principal.apiKeyId}` : `user:${batch.principal.userId}`;
    const { raise, count } = this.button.plan(credential, [...folded.values()], batch.receivedAt);
    const request = ({ organizationId, deviceId, type, presses, first, last }: Folded) => ({
      // Keyed by the presses: an upload resent after an ambiguous failure does not count them twice.
      idempotencyKey: `pose|${deviceId}|${type}|${first}|${last.timestamp}|${presses}`,
      organizationId,
      type,
      deviceId,
      occurrences: presses,
      // The place of the latest press.
      userId: last.userId,
      buildingId: last.buildingId,
      floorId: last.floorId,
      x: last.x,
      y: last.y,
      lat: last.lat,
      lng: last.lng,
      // Raised at once whatever the order of the buffer it came in, dated by the press (its first, when folded).
      details: {
        source: 'pose',
        occurred_at: new Date(first).toISOString(),
        ...(batch.receivedAt - first > this.reorderWindowMs ? { late: true, delay_ms: batch.receivedAt - first } : {}),
      },
      by,
    });
    const closedMeanwhile = await this.alarms.countRepeats(count.map(request));
    await this.alarms.raiseAllOnce([...raise.map(request), ...closedMeanwhile]);
  }
}
