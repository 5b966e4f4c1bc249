/**
 * GEOFENCE_MAX_STAY_TIME: one alarm per stay longer than the fence's `max_stay_time`.
 *
 * - Strictly longer: a stay of exactly `max_stay_time` is still allowed, one millisecond more is not.
 * - A stay is what the transition detector confirmed (after debounce), from its `enter.at`; boundary jitter
 *   within the exit grace therefore does not end it, and cannot be used to dodge the alarm.
 * - One alarm per stay: the stay remembers it fired. Leaving ends the stay, so the next one may fire again.
 * - A rule changed mid-stay applies to the running stay, unless it already fired.
 * - Judged on the fixes, not on our own absence: between the device's last position and the moment detection of
 *   the building resumed (`Watch`: a gateway start, a takeover), nobody saw it stay, so that stretch does not
 *   count. A position inside after we are back shows the stay went on, and counts it whole.
 */
import type { Geofence } from '../storage/entities/geofence.entity.js';

/** Seconds by zone id; zones without a (positive) rule are tracked but never alarm. */
export type MaxStayRules = ReadonlyMap<string, number>;

export interface Stay {
  enteredAt: number;
  fired: boolean;
}

/** Plain JSON, like the transition state. */
export interface MaxStayState {
  stays: Record<string, Stay>;
}

export interface MaxStayObservation {
  /** Zones the device is confirmed inside (after debounce). */
  insideZoneIds: Iterable<string>;
  now: number;
  /**
   * Start of each stay, normally `confirmedInside(transitionState)`: with a min dwell the stay began before the
   * enter was confirmed. A zone missing here starts at `now`.
   */
  enteredAt?: ReadonlyMap<string, number>;
  /** When `now` is a sweep's rather than a position's: what the stays may be assumed to have lasted from. */
  watch?: Watch;
}

/** What the stay may be assumed to have lasted from: the device's last position and when detection last resumed. */
export interface Watch {
  lastSeenAt: number;
  watchedSince: number;
}

/** The stay's length now, less the stretch nobody watched (between the last position and the resumption). */
function stayedMs(stay: Stay, now: number, watch: Watch | undefined): number {
  const unwatched = watch ? Math.max(0, watch.watchedSince - Math.max(watch.lastSeenAt, stay.enteredAt)) : 0;
  return now - stay.enteredAt - unwatched;
}

export interface MaxStayAlarm {
  zoneId: string;
  enteredAt: number;
  /** Length of the stay when it fired, in seconds (fractional). */
  stayedS: number;
  maxStayTimeS: number;
}

export interface MaxStayResult {
  /** The same object as the input when nothing changed. */
  state: MaxStayState;
  alarms: readonly MaxStayAlarm[];
}

export function initialMaxStayState(): MaxStayState {
  return { stays: {} };
}

/**
 * The state rebuilt from stored enters: one stay per zone from its enter's `at`, marked fired when its alarm was
 * already raised (the same stay keeps its one alarm across the rebuild).
 */
export function restoredState(enteredAt: ReadonlyMap<string, number>, alarmed: ReadonlySet<string>): MaxStayState {
  const stays: Record<string, Stay> = {};
  for (const [zoneId, at] of enteredAt) stays[zoneId] = { enteredAt: at, fired: alarmed.has(zoneId) };
  return { stays };
}

export function maxStayRulesOf(geofences: Iterable<Pick<Geofence, 'id' | 'maxStayTime'>>): Map<string, number> {
  const rules = new Map<string, number>();
  for (const g of geofences) if (g.maxStayTime != null && g.maxStayTime > 0) rules.set(g.id, g.maxStayTime);
  return rules;
}

/** Strictly over its fence's limit and not yet alarmed. */
function isDue(zoneId: string, stay: Stay, rules: MaxStayRules, now: number, watch?: Watch): boolean {
  if (stay.fired) return false;
  const limit = rules.get(zoneId);
  return limit != null && limit > 0 && stayedMs(stay, now, watch) > limit * 1000;
}

/** The stay after checking it, and the alarm if this is the moment it went over. */
function check(zoneId: string, stay: Stay, rules: MaxStayRules, now: number, watch?: Watch): { stay: Stay; alarm?: MaxStayAlarm } {
  if (!isDue(zoneId, stay, rules, now, watch)) return { stay };
  const limit = rules.get(zoneId)!;
  return {
    stay: { enteredAt: stay.enteredAt, fired: true },
    alarm: { zoneId, enteredAt: stay.enteredAt, stayedS: stayedMs(stay, now, watch) / 1000, maxStayTimeS: limit },
  };
}

const NO_ALARMS: readonly MaxStayAlarm[] = Object.freeze([]);

/** The same stays, none of them due: the common case, decided without allocating. */
function nothingChanges(state: MaxStayState, inside: readonly string[], rules: MaxStayRules, now: number, watch?: Watch): boolean {
  let stays = 0;
  for (const zoneId in state.stays) {
    if (isDue(zoneId, state.stays[zoneId]!, rules, now, watch)) return false;
    stays++;
  }
  if (stays !== inside.length) return false;
  for (const zoneId of inside) if (!Object.hasOwn(state.stays, zoneId)) return false;
  return true;
}

export function step(state: MaxStayState, observation: MaxStayObservation, rules: MaxStayRules): MaxStayResult {
  const { now, enteredAt, watch } = observation;
  const inside = [...new Set(observation.insideZoneIds)];
  if (nothingChanges(state, inside, rules, now, watch)) return { state, alarms: NO_ALARMS };
  const stays: Record<string, Stay> = {};
  const alarms: MaxStayAlarm[] = [];
  for (const zoneId of inside) {
    const known = Object.hasOwn(state.stays, zoneId) ? state.stays[zoneId] : undefined;
    const result = check(zoneId, known ?? { enteredAt: enteredAt?.get(zoneId) ?? now, fired: false }, rules, now, watch);
    stays[zoneId] = result.stay;
    if (result.alarm) alarms.push(result.alarm);
  }
  return { state: { stays }, alarms };
}

/** Raises what has become due since the last position, for a device that stands still and reports rarely. */
export function sweep(state: MaxStayState, rules: MaxStayRules, now: number, watch?: Watch): MaxStayResult {
  let stays: Record<string, Stay> | null = null;
  const alarms: MaxStayAlarm[] = [];
  for (const [zoneId, stay] of Object.entries(state.stays)) {
    const result = check(zoneId, stay, rules, now, watch);
    if (!result.alarm) continue;
    stays ??= { ...state.stays };
    stays[zoneId] = result.stay;
    alarms.push(result.alarm);
  }
  return { state: stays ? { stays } : state, alarms };
}
