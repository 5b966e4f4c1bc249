import type { ZoneEventRecord } from '../../shared/detection/zone-event.js';
import type { RaiseAlarm } from '../alarms/alarm-service.js';

export type { ZoneEventRecord };

/** An event trigger area's content, as a device entering it is sent it. */
export interface TriggeredEvent {
  id: number;
  buildingId: number;
  name: string;
  info: string;
  url: string | null;
}

/** A detector alarm, named by its idempotency key so that storing it again (a retry) is a no-op. */
export type DetectedAlarm = Omit<RaiseAlarm, 'by'> & { idempotencyKey: string };

/** What the detectors found in one batch or one sweep. */
export interface Detections {
  zoneEvents: ZoneEventRecord[];
  alarms: DetectedAlarm[];
  /** Event trigger areas entered: their content goes to `devices/{id}` (plain data: it travels on the bus). */
  triggered: { organizationId: string; deviceId: string; userId?: string | null; event: TriggeredEvent }[];
}

export const emptyDetections = (): Detections => ({ zoneEvents: [], alarms: [], triggered: [] });
