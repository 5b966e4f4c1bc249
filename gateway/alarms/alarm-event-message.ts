import type { AlarmSeverity } from '../../shared/detection/alarm-severity.js';
import type { SilenceEvidence } from '../../shared/detection/silence-evidence.js';
import type { AlarmState } from '../../shared/detection/alarm-states.js';

/* What an alarm looks like outside storage, and what its events carry on the bus (channel `alarms`). */

export interface AlarmHistoryEntry {
  state: AlarmState;
  from: AlarmState | null;
  at: string;
  by: { user_id: string; email: string } | 'system';
  comment: string | null;
  /** Set on an entry that changed no state: 'escalated' (nobody confirmed a critical alarm in time; see alarm-escalation.ts). */
  event?: 'escalated';
}

/** An alarm as the API, the bus and the WebSocket carry it; `seq` is the seq of its latest event. */
export interface AlarmView {
  id: string;
  seq: number;
  type: string;
  severity: AlarmSeverity;
  state: AlarmState;
  organization_id: string;
  building_id: number | null;
  floor_id: number | null;
  device_id: string | null;
  user_id: string | null;
  geofence_id: string | null;
  position: {
    floor_id: number | null;
    cartesians: { x: number; y: number } | null;
    georeferences: { lat: number; lng: number } | null;
  } | null;
  details: Record<string, unknown>;
  occurrences: number;
  history: AlarmHistoryEntry[];
  /** A DEADMAN whose device reported again: when (also in `details`). */
  contact_restored_at: string | null;
  /** When the condition happened, in event time (the fix or press that showed it); `created_at` when not recorded. */
  occurred_at: string;
  /** Found from fixes or a press that arrived late (past the reorder window): `occurred_at` is in the past. */
  late: boolean;
  /** A silence DEADMAN: the fixes that reached us late and cover the silence (none yet: null). */
  silence_evidence: SilenceEvidence | null;
  created_at: string;
  updated_at: string;
}

/** What happened to an alarm in one event of its stream. */
export const ALARM_EVENT_KINDS = ['raised', 'updated', 'state_changed', 'escalated'] as const;
export type AlarmEventKind = (typeof ALARM_EVENT_KINDS)[number];

/** One event of an organization's alarm stream (a raise, a repeat, a state change, an escalation). */
export interface AlarmEventMessage {
  organizationId: string;
  buildingId: number | null;
  event: AlarmView & { event: AlarmEventKind };
}
