import { severityOf, severityRank, type AlarmSeverity } from '../../shared/detection/alarm-severity.js';
import { ALARM_TRANSITIONS, type AlarmState, type AlarmType } from '../../shared/detection/alarm-states.js';

export type { AlarmSeverity, AlarmState, AlarmType };
export { ALARM_SEVERITIES } from '../../shared/detection/alarm-severity.js';
export { ALARM_TYPES } from '../../shared/detection/alarm-states.js';

/** The shapes the console reads (docs/api: cartography, positions, alarms). */
export interface Building {
  id: number;
  name: string;
  dimensions: { width: number; length: number };
  /** Placement (the detail carries it; the compact list may not). */
  location?: { lat: number; lng: number };
  rotation?: number;
}

export interface Floor {
  id: number;
  building_id: number;
  name: string;
  level: number;
  maps: { scale: number | null; map_url: string | null };
}

export interface Geofence {
  id: string;
  name: string;
  type: 'POLYGON' | 'CIRCLE' | 'POINT' | 'LINE';
  cartesians: [number, number][];
  radius: number | null;
  floor_id: number;
}

export interface CartographyEvent {
  id: number;
  name: string;
  position: { floor_id: number; radius: number; cartesians: { x: number; y: number } };
}

export interface BuildingDetail extends Building {
  floors: Floor[];
  geofences: Geofence[];
  events: CartographyEvent[];
  /** The navigation graph (only whether it has links matters here: no links, no routes). */
  paths?: { links: unknown[] };
  indoor_pois?: IndoorPoi[];
}

/** A point of interest on a floor (defibrillator, entrance...), drawn with its category's icon. */
export interface IndoorPoi {
  id: number;
  name: string;
  category_id: number | null;
  position: { floor_id: number; cartesians: { x: number; y: number } };
}

/** GET /api/v1/poi_categories: `icon_url` is empty when the category has no icon. */
export interface PoiCategory {
  id: number;
  code: string;
  name_en: string;
  icon_url: string;
}

export interface PositionFeature {
  id: string;
  properties: {
    device_id: string;
    user_id: string | null;
    building_id: number | null;
    floor_id: number | null;
    time: string;
    accuracy: number | null;
    local_coordinates: [number, number] | null;
    /** False while the person is outside their tracking window (REST views only; pushed positions are tracked). */
    tracked_now?: boolean;
  };
}

/** GET /api/v1/users/me/privacy, the part the console shows. */
export interface MyPrivacy {
  tracking_window: { source: 'user' | 'group' | 'none'; tracked_always: boolean; tracked_now: boolean };
}

export interface Alarm {
  id: string;
  seq: number;
  type: AlarmType;
  /** Fixed per type; absent only from a gateway older than severities. */
  severity?: AlarmSeverity;
  state: AlarmState;
  building_id: number | null;
  floor_id: number | null;
  device_id: string | null;
  user_id: string | null;
  position: { floor_id: number | null; cartesians: { x: number; y: number } | null } | null;
  occurrences: number;
  details?: Record<string, unknown>;
  history?: { state: AlarmState; at: string; event?: 'escalated'; comment: string | null }[];
  /** When it happened, in event time, and whether it was found from fixes that arrived late (absent from older gateways). */
  occurred_at?: string;
  late?: boolean;
  /** A silence DEADMAN: the fixes its device buffered meanwhile and uploaded late. */
  silence_evidence?: { count: number; first_at: string; last_at: string; was_moving: boolean; moved_m: number | null } | null;
  created_at: string;
  updated_at: string;
  /** On pushed alarms: raised | updated | state_changed | escalated. */
  event?: string;
}

export const alarmSeverity = (alarm: Pick<Alarm, 'type' | 'severity'>): AlarmSeverity => alarm.severity ?? severityOf(alarm.type);

/** Inbox order: critical, high, normal; newest first within. Negative when `a` comes first. */
export const inboxOrder = (a: Alarm, b: Alarm): number =>
  severityRank(alarmSeverity(a)) - severityRank(alarmSeverity(b)) || Date.parse(b.created_at) - Date.parse(a.created_at);

/** Closing or marking false a critical or high alarm needs a comment (the gateway answers 422 without one). */
export const needsComment = (alarm: Alarm, state: AlarmState): boolean =>
  (state === 'CLOSED' || state === 'MARKED_FALSE') && alarmSeverity(alarm) !== 'normal';

/** How many times the alarm escalated (entries of its history). */
export const escalations = (alarm: Alarm): number => alarm.history?.filter((entry) => entry.event === 'escalated').length ?? 0;

/** The operator's actions, in the order the buttons appear; each is offered only where the transition table allows it. */
export const ALARM_ACTIONS: readonly { state: AlarmState; label: string }[] = [
  { state: 'CONFIRMED', label: 'Confirm' },
  { state: 'MARKED_FALSE', label: 'Mark false' },
  { state: 'CLOSED', label: 'Close' },
];

export const allowedActions = (state: AlarmState) => ALARM_ACTIONS.filter((action) => ALARM_TRANSITIONS[state]?.includes(action.state));

export const isActive = (state: AlarmState) => (ALARM_TRANSITIONS[state]?.length ?? 0) > 0;

export const TYPE_LABELS: Record<string, string> = {
  DANGER: 'DANGER',
  ASSISTANCE_REQUEST: 'ASSISTANCE',
  DEADMAN: 'DEAD-MAN',
  GEOFENCE_MAX_STAY_TIME: 'OVERSTAY',
  BUILDING_SILENT: 'BUILDING SILENT',
};

export const STATE_LABELS: Record<string, string> = {
  OPEN: 'OPEN',
  CONFIRMED: 'CONFIRMED',
  OTHER: 'OTHER',
  CLOSED: 'CLOSED',
  MARKED_FALSE: 'MARKED FALSE',
};

export const typeLabel = (type: string) => TYPE_LABELS[type] ?? type.replace(/_/g, ' ');
export const stateLabel = (state: string) => STATE_LABELS[state] ?? state.replace(/_/g, ' ');

export interface Group {
  id: string;
  name: string;
}

/** A point of a route leg, in floor metres and degrees. */
export interface RoutePoint {
  x: number;
  y: number;
  lat: number;
  lng: number;
}

/** GET /api/v1/buildings/:id/route (docs/api/routing.md). */
export interface Route {
  distance_m: number;
  duration_s: number;
  from: RoutePoint & { floor_id: number; snap_distance_m: number };
  to: RoutePoint & { floor_id: number; snap_distance_m: number };
  legs: { floor_id: number; distance_m: number; points: RoutePoint[] }[];
  steps: {
    instruction: string;
    distance_m: number;
    floor_id: number;
    floor_change?: { from_floor_id: number; to_floor_id: number; direction: 'up' | 'down'; via: string };
  }[];
}

export interface RankedDevice {
  device_id: string;
  user_id: string | null;
  floor_id: number;
  x: number;
  y: number;
  route_distance_m: number;
}

/** A JSON report: rows keyed by the columns of `meta`. */
export interface ReportResult<Row> {
  data: Row[];
}

/** `GET /api/v1/buildings/{id}/trail`: a device's fixes ordered by their own time, each with when it reached us. */
export interface TrailResult {
  device_id: string;
  reorder_window_ms: number;
  truncated: boolean;
  late_count: number;
  data: { ts: string; received_at: string; delay_ms: number; late: boolean; floor_id: number; x: number; y: number }[];
}
