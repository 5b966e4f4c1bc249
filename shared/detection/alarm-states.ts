/**
 * Alarm types and states (spec 2.11 and part 3) and the one table of which state may follow which. The spec
 * only fixes that an alarm starts OPEN; the rest is ours: CLOSED and MARKED_FALSE are verdicts and final,
 * CONFIRMED still has to be attended (CLOSED) or may turn out unclear (OTHER), and OTHER may still be settled
 * any way. Staying in the same state is not a transition.
 */
export const ALARM_TYPES = [
  'DANGER',
  'DEADMAN',
  'GEOFENCE_MAX_STAY_TIME',
  'ASSISTANCE_REQUEST',
  'BREACH',
  'EMERGENCY',
  'STATIONARY',
  /** Many of a building's devices silent together: one alarm for the building (shared/detection/storm.detector.ts). */
  'BUILDING_SILENT',
] as const;
export type AlarmType = (typeof ALARM_TYPES)[number];

export const ALARM_STATES = ['OPEN', 'CLOSED', 'CONFIRMED', 'MARKED_FALSE', 'OTHER'] as const;
export type AlarmState = (typeof ALARM_STATES)[number];

export const INITIAL_ALARM_STATE: AlarmState = 'OPEN';

export const ALARM_TRANSITIONS: Readonly<Record<AlarmState, readonly AlarmState[]>> = Object.freeze({
  OPEN: Object.freeze(['CLOSED', 'CONFIRMED', 'MARKED_FALSE', 'OTHER'] as const),
  CONFIRMED: Object.freeze(['CLOSED', 'OTHER'] as const),
  OTHER: Object.freeze(['CLOSED', 'CONFIRMED', 'MARKED_FALSE'] as const),
  CLOSED: Object.freeze([] as const),
  MARKED_FALSE: Object.freeze([] as const),
});

export function isAlarmState(value: unknown): value is AlarmState {
  return typeof value === 'string' && (ALARM_STATES as readonly string[]).includes(value);
}

export function isAlarmType(value: unknown): value is AlarmType {
  return typeof value === 'string' && (ALARM_TYPES as readonly string[]).includes(value);
}

export function isFinalAlarmState(state: AlarmState): boolean {
  return ALARM_TRANSITIONS[state].length === 0;
}

/** False for anything not in the table, including strings that are not states (input arrives untyped). */
export function canTransition(from: AlarmState, to: AlarmState): boolean {
  return isAlarmState(from) && isAlarmState(to) && ALARM_TRANSITIONS[from].includes(to);
}
