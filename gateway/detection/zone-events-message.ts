import type { Detections, ZoneEventRecord } from './detections.js';

/** One organization's zone events and triggers of one batch or sweep, as announced once they are stored. */
export interface ZoneEventsMessage {
  organizationId: string;
  zoneEvents: ZoneEventRecord[];
  triggered: Detections['triggered'];
}
