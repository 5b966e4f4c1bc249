/**
 * The compare half of "tag, then compare": one device's zone tags against its previous ones, with debounce, so
 * a position jittering across a fence line does not emit an enter/exit pair every second.
 *
 * Semantics, per zone:
 * - `enter` fires once the zone has been observed on every position for at least `minDwellS` (>=, so 0 fires on
 *   the first position); its `at` is the first of those positions, `firedAt` the moment it was decided.
 * - `exit` is the mirror image with `exitGraceS`.
 * - One contrary position resets the pending side: jitter shorter than the threshold produces nothing. A pending
 *   side that held for its threshold before the contrary position came is settled first (dated as always), so
 *   the outcome depends on the fixes' times only, not on whether a sweep ran between them.
 * - Between positions the last observation is assumed to hold, which is what lets `sweep` settle a device that
 *   went quiet while pending. It also means a device that vanishes stays "inside"; the caller decides when a
 *   device is gone and steps it with no zones.
 * Zone ids are opaque, so event and conversion areas can go through here too (no rule means immediate).
 * A zone removed from cartography is simply never observed again, so it exits after its grace.
 */
import type { Geofence } from '../storage/entities/geofence.entity.js';

export interface DwellRule {
  minDwellS?: number | null;
  exitGraceS?: number | null;
}

/** By zone id; a zone without a rule (event areas, a fence just deleted) has 0/0: immediate. */
export type TransitionRules = ReadonlyMap<string, DwellRule>;

export interface ZoneTrack {
  /** Start of the confirmed stay (the `at` of its `enter`); null while confirmed outside. */
  enteredAt: number | null;
  /** First of an unbroken run of positions contradicting the confirmed side; null when they agree. */
  pendingSince: number | null;
}

/** Plain JSON: can be kept in memory, in Redis or in a row as is. Zones confirmed outside and settled are dropped. */
export interface TransitionState {
  /** Floor of the last observation; informational, as zone ids are already per floor. */
  floorId: number | null;
  zones: Record<string, ZoneTrack>;
}

/** Zone ids without repeats, as a caller tagging position after position can keep them (a Set is one). */
export interface ZoneIdSet extends Iterable<string> {
  readonly size: number;
  has(zoneId: string): boolean;
}

export interface ZoneObservation {
  /** Zones containing the new position (from `ZoneIndex.zonesAt`). */
  zoneIds: Iterable<string> | ZoneIdSet;
  floorId?: number | null;
}

export interface ZoneTransition {
  type: 'enter' | 'exit';
  zoneId: string;
  /** When the device was first seen on the new side. */
  at: number;
  /** When the debounce let it through; equals `at` without debounce. */
  firedAt: number;
}

export interface TransitionResult {
  /** The same object as the input when nothing changed. */
  state: TransitionState;
  transitions: readonly ZoneTransition[];
}

export function initialTransitionState(): TransitionState {
  return { floorId: null, zones: newZones() };
}

export function transitionRulesOf(geofences: Iterable<Pick<Geofence, 'id' | 'minDwellS' | 'exitGraceS'>>): Map<string, DwellRule> {
  const rules = new Map<string, DwellRule>();
  for (const g of geofences) rules.set(g.id, { minDwellS: g.minDwellS, exitGraceS: g.exitGraceS });
  return rules;
}

/**
 * The state rebuilt from stored enters (a gateway taking a building over, or restarting): confirmed inside each
 * zone since its enter's `at`. A debounce under way when the state was lost starts again, unless `pendingSince`
 * names it (the late path knows it: a stored event decided after the moment rebuilt, pending since its `at`).
 */
export function restoredState(
  insideSince: ReadonlyMap<string, number>,
  floorId: number | null,
  pendingSince: ReadonlyMap<string, number> = new Map(),
): TransitionState {
  const zones = newZones();
  for (const [zoneId, enteredAt] of insideSince) zones[zoneId] = { enteredAt, pendingSince: null };
  for (const [zoneId, since] of pendingSince) zones[zoneId] = { enteredAt: zones[zoneId]?.enteredAt ?? null, pendingSince: since };
  return { floorId, zones };
}

/** Zones the device is confirmed inside, with the start of each stay: the input max-stay wants. */
export function confirmedInside(state: TransitionState): Map<string, number> {
  const inside = new Map<string, number>();
  for (const [zoneId, track] of Object.entries(state.zones)) if (track.enteredAt !== null) inside.set(zoneId, track.enteredAt);
  return inside;
}

function thresholdMs(rules: TransitionRules, zoneId: string, entering: boolean): number {
  const rule = rules.get(zoneId);
  const seconds = entering ? rule?.minDwellS : rule?.exitGraceS;
  return seconds != null && seconds > 0 ? seconds * 1000 : 0;
}

/**
 * One zone given whether the latest evidence says "in": the new track (null when there is nothing left to
 * remember; the same object when it holds as it was), and the transition it settles, if any, pushed onto
 * `transitions`.
 */
function advance(
  track: ZoneTrack,
  observedIn: boolean,
  zoneId: string,
  rules: TransitionRules,
  now: number,
  transitions: ZoneTransition[],
): ZoneTrack | null {
  const inside = track.enteredAt !== null;
  if (observedIn === inside) {
    if (track.pendingSince !== null) {
      const heldMs = thresholdMs(rules, zoneId, !inside);
      if (now - track.pendingSince >= heldMs) {
        // The other side held for its threshold before this fix contradicted it (between fixes the last
        // observation holds, so a sweep in time would have settled it): it happened, whenever the fixes arrived
        // and whether or not a sweep ran in between (docs/event-time.md). This fix then starts the way back.
        transitions.push({ type: inside ? 'exit' : 'enter', zoneId, at: track.pendingSince, firedAt: track.pendingSince + heldMs });
        const settled = inside ? OUTSIDE : { enteredAt: track.pendingSince, pendingSince: null };
        return advance(settled, observedIn, zoneId, rules, now, transitions);
      }
    }
    return !inside ? null : track.pendingSince === null ? track : { enteredAt: track.enteredAt, pendingSince: null };
  }
  const pendingSince = track.pendingSince ?? now;
  if (now - pendingSince < thresholdMs(rules, zoneId, observedIn)) {
    return track.pendingSince === pendingSince ? track : { enteredAt: track.enteredAt, pendingSince };
  }
  transitions.push({ type: observedIn ? 'enter' : 'exit', zoneId, at: pendingSince, firedAt: now });
  return observedIn ? { enteredAt: pendingSince, pendingSince: null } : null;
}

/**
 * Zone records have no prototype: V8 keeps such an object as a hash table from the start, where one built key by
 * key from `{}` first goes through a hidden class per key (tens of fence ids per device at 10,000 fences), and
 * no zone id can meet an inherited name.
 */
const newZones = (): Record<string, ZoneTrack> => Object.create(null) as Record<string, ZoneTrack>;

const OUTSIDE: ZoneTrack = { enteredAt: null, pendingSince: null };

/** Exits before enters, so moving between adjacent zones reads as leaving one then entering the other. */
function ordered(transitions: ZoneTransition[]): ZoneTransition[] {
  return transitions.sort(
    (a, b) =>
      (a.type === b.type ? 0 : a.type === 'exit' ? -1 : 1) || a.at - b.at || (a.zoneId < b.zoneId ? -1 : a.zoneId > b.zoneId ? 1 : 0),
  );
}

const NO_TRANSITIONS: readonly ZoneTransition[] = Object.freeze([]);

/**
 * True when the observation only confirms what the state already says: every tracked zone is confirmed inside
 * with nothing pending, and the observed zones are exactly those. The common case at 1 Hz (still inside the same
 * fences, or outside all of them), so it is decided without allocating.
 */
function confirmsState(state: TransitionState, observed: ZoneIdSet, floorId: number | null): boolean {
  if (state.floorId !== floorId) return false;
  let tracked = 0;
  for (const zoneId in state.zones) {
    const track = state.zones[zoneId]!;
    if (track.pendingSince !== null || track.enteredAt === null || !observed.has(zoneId)) return false;
    tracked++;
  }
  return tracked === observed.size;
}

/**
 * Tracks are never modified, so an unchanged one is shared between the old state and the new. A `ZoneIdSet` given
 * as `zoneIds` is read as is (a caller tagging many positions can hand the same one each time).
 */
export function step(state: TransitionState, observation: ZoneObservation, rules: TransitionRules, now: number): TransitionResult {
  const zoneIds = observation.zoneIds;
  const observed: ZoneIdSet = typeof (zoneIds as Partial<ZoneIdSet>).has === 'function' ? (zoneIds as ZoneIdSet) : new Set(zoneIds);
  // Nothing changes: the same state object comes back, so callers can skip work keyed on it.
  if (confirmsState(state, observed, observation.floorId ?? null)) return { state, transitions: NO_TRANSITIONS };
  const zones = newZones();
  const transitions: ZoneTransition[] = [];
  // The zones observed, then those tracked but not observed: each zone is looked up once (twice in a record
  // built elsewhere, which may inherit names).
  const own = Object.getPrototypeOf(state.zones) === null;
  for (const zoneId of observed) {
    const known = own || Object.hasOwn(state.zones, zoneId) ? state.zones[zoneId] : undefined;
    const track = advance(known ?? OUTSIDE, true, zoneId, rules, now, transitions);
    if (track) zones[zoneId] = track;
  }
  for (const zoneId in state.zones) {
    if (observed.has(zoneId)) continue;
    const track = advance(state.zones[zoneId]!, false, zoneId, rules, now, transitions);
    if (track) zones[zoneId] = track;
  }
  return {
    state: { floorId: observation.floorId ?? null, zones },
    transitions: transitions.length > 0 ? ordered(transitions) : NO_TRANSITIONS,
  };
}

/** Settles pending zones whose threshold has elapsed since the last position, assuming it still holds. */
export function sweep(state: TransitionState, rules: TransitionRules, now: number): TransitionResult {
  let zones: Record<string, ZoneTrack> | null = null;
  const transitions: ZoneTransition[] = [];
  for (const [zoneId, track] of Object.entries(state.zones)) {
    if (track.pendingSince === null) continue;
    const settled = transitions.length;
    const next = advance(track, track.enteredAt === null, zoneId, rules, now, transitions);
    if (transitions.length === settled) continue;
    zones ??= Object.assign(newZones(), state.zones);
    if (next) zones[zoneId] = next;
    else delete zones[zoneId];
  }
  // Unchanged state comes back as the same object, so a sweep over many idle devices allocates nothing.
  return { state: zones ? { floorId: state.floorId, zones } : state, transitions: ordered(transitions) };
}
