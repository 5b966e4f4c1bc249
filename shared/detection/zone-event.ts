import type { ZoneKind } from './zone-index.js';

/** An enter or exit of a zone, as stored for reports and pushed to `buildings/{id}/geofence-events`. */
export interface ZoneEventRecord {
  organizationId: string;
  buildingId: number;
  floorId: number | null;
  zoneKind: ZoneKind;
  /** Geofence uuid, or the event id for event and conversion areas. */
  zoneId: string;
  zoneName: string;
  deviceId: string;
  userId: string | null;
  type: 'enter' | 'exit';
  /** When the transition happened (first observation, before any debounce). */
  at: number;
  /** When it was decided (after debounce). */
  firedAt: number;
  /** Found from fixes that arrived late (by more than the reorder window): how long after `at` it was learned. */
  late?: boolean;
  delayMs?: number;
  /** Its stored id (the late path's events, which name or are named by a correction). */
  id?: string;
  /** On a correction: the id of the stored event it replaces (kept, marked superseded). */
  supersedes?: string | null;
  /** With `supersedes`: the `at` of the event it replaces (same type, zone and device). */
  supersedesAt?: number;
}
