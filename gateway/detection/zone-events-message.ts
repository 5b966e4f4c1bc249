import type { Detections, ZoneEventRecord } from './detections.js';

/** The bus channel stored zone events (enter/exit) and event-area triggers are announced on. */
export const ZONE_EVENTS_CHANNEL = 'zone-events';

/** One organization's zone events and triggers of one batch or sweep, as announced once they are stored. */
export interface ZoneEventsMessage {
  organizationId: string;
  zoneEvents: ZoneEventRecord[];
  triggered: Detections['triggered'];
}
