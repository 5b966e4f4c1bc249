/**
 * DEADMAN: somebody inside a building who stopped moving (`still`) or whose device stopped reporting
 * (`silence`). Positions only update last-seen state (`step`); alarms come from `sweep`, which the
 * detection engine's periodic sweep calls for every device, so there is no timer per device and a silent device
 * is noticed at all. Time is the server's clock at
 * arrival, never the device's.
 *
 * - still: within `deadmanRadiusM` of an anchor for longer than `deadmanAfterS` (strictly). Leaving the radius
 *   or changing floor moves the anchor and re-arms it. Needs both settings. Between positions the last one is
 *   assumed to hold, so a device reporting rarely while lying still fires on time; once the device counts as
 *   silent, `silence` speaks for it instead and `still` waits.
 * - silence: no position for longer than `deadmanSilenceS` (strictly), after having been in the building for at
 *   least `deadmanAfterS` (0 when unset, so one position is enough). The minimum presence keeps a device that
 *   merely brushed the building from raising it.
 * - Our own absence is no silence and no stillness: `watchedSince` is when detection of the building last resumed
 *   (gateway start, takeover, an outage over). Silence runs from the later of the last position and that moment,
 *   and the stretch between the last position and that moment does not count towards stillness either, so a
 *   device reporting within its window after we come back raises nothing, and one that stays silent raises its
 *   silence one window after we came back (dated, as always, from its last position).
 * - Each fires once per condition. A position after a fired silence starts a new session (new anchor, new
 *   presence, both re-armed): the gap means nothing is known about what happened in between.
 * - A building without settings, or a setting left unset, switches that condition off.
 * - The detector cannot tell walking out of the building from going quiet: the caller deletes a device's entry
 *   when it leaves (outdoor fix, logout).
 */
export interface DeadmanSettings {
  deadmanAfterS?: number | null;
  deadmanRadiusM?: number | null;
  deadmanSilenceS?: number | null;
}

export interface DeadmanPosition {
  x: number;
  y: number;
  floorId: number;
  buildingId: number;
}

export interface DeadmanState {
  buildingId: number;
  anchor: { x: number; y: number; floorId: number; at: number };
  lastSeenAt: number;
  insideBuildingSince: number;
  firedStill: boolean;
  firedSilence: boolean;
}

export type DeadmanReason = 'still' | 'silence';

const setting = (value: number | null | undefined): number | null => (value != null && Number.isFinite(value) && value >= 0 ? value : null);

function fresh(position: DeadmanPosition, now: number): DeadmanState {
  return {
    buildingId: position.buildingId,
    anchor: { x: position.x, y: position.y, floorId: position.floorId, at: now },
    lastSeenAt: now,
    insideBuildingSince: now,
    firedStill: false,
    firedSilence: false,
  };
}

export function step(
  state: DeadmanState | undefined,
  position: DeadmanPosition,
  settings: DeadmanSettings | undefined,
  now: number,
): DeadmanState {
  if (!state || state.buildingId !== position.buildingId || state.firedSilence) return fresh(position, now);
  const { anchor } = state;
  const radius = setting(settings?.deadmanRadiusM) ?? 0;
  const dx = position.x - anchor.x;
  const dy = position.y - anchor.y;
  const moved = position.floorId !== anchor.floorId || dx * dx + dy * dy > radius * radius;
  // Spelled out rather than spread: this runs for every position of every device.
  return {
    buildingId: state.buildingId,
    anchor: moved ? { x: position.x, y: position.y, floorId: position.floorId, at: now } : anchor,
    lastSeenAt: now,
    insideBuildingSince: state.insideBuildingSince,
    firedStill: moved ? false : state.firedStill,
    firedSilence: state.firedSilence,
  };
}

/** Whether the device counts as silent now: no position for longer than the silence setting, since `watchedSince` at the earliest. */
export function isSilent(state: DeadmanState, settings: DeadmanSettings | undefined, now: number, watchedSince = -Infinity): boolean {
  const silenceS = setting(settings?.deadmanSilenceS);
  return silenceS !== null && now - Math.max(state.lastSeenAt, watchedSince) > silenceS * 1000;
}

/**
 * One device: the state with the fired flag set, and the alarm, when a condition has just become true.
 * `watchedSince`: when detection of its building last resumed (none: always watched).
 */
export function sweep(
  state: DeadmanState,
  settings: DeadmanSettings | undefined,
  now: number,
  watchedSince = -Infinity,
): { state: DeadmanState; alarm?: { reason: DeadmanReason; since: number } } {
  const afterS = setting(settings?.deadmanAfterS);
  const radiusM = setting(settings?.deadmanRadiusM);
  if (isSilent(state, settings, now, watchedSince)) {
    const presentLongEnough = state.lastSeenAt - state.insideBuildingSince >= (afterS ?? 0) * 1000;
    if (state.firedSilence || !presentLongEnough) return { state };
    return { state: { ...state, firedSilence: true }, alarm: { reason: 'silence', since: state.lastSeenAt } };
  }
  if (afterS === null || radiusM === null || state.firedStill) return { state };
  // Between positions the last one holds, but only while we were there to see nothing change.
  const unwatched = Math.max(0, watchedSince - state.lastSeenAt);
  if (now - state.anchor.at - unwatched <= afterS * 1000) return { state };
  return { state: { ...state, firedStill: true }, alarm: { reason: 'still', since: state.anchor.at } };
}

/** A position now would be the first since its silence alarm: contact with the device is restored. */
export const contactRestored = (state: DeadmanState): boolean => state.firedSilence;

/** One stored position of a device, in arrival order; `position` is null when it was outside any building. */
export interface DeadmanTrailEntry {
  position: DeadmanPosition | null;
  at: number;
}

export interface DeadmanRestoreHints {
  /** The `since` of the device's latest still alarm already raised. */
  stillAlarmedSince?: number;
  /** The `since` of the device's silence alarm still OPEN: when it is the trail's last position, that silence has fired. */
  silenceAlarmedSince?: number;
  /** The trail was cut at a length, not at the device's arrival: a session reaching its start is long enough present. */
  truncated?: boolean;
}

/**
 * The state a detector that had followed these positions would be in: the rebuild from stored positions when a
 * gateway takes a building over or restarts. `trail` is the device's latest stored positions, oldest first, the
 * last being its latest; replaying them with the sweeps that ran between them (a gap past the silence resets
 * the session as it did live) gives the anchor, presence and fired flags exactly, as far as the trail reaches.
 * Silence then runs from the latest position's arrival, as it did.
 *
 * Stillness older than the trail cannot be seen in it. When the trail never moved and its session reaches back
 * to its first entry, `stillAlarmedSince` (the `since` of a still alarm already raised for the device) is taken
 * as the anchor, fired: the same stillness keeps its one alarm. Otherwise the anchor is the trail's, so a
 * stillness longer than the trail and not yet alarmed fires at most `deadmanAfterS` late. Likewise a session
 * reaching back past a `truncated` trail counts as present for `deadmanAfterS`: the trail was cut, not the stay
 * (a device with a whole trail of positions in the building did not merely brush it).
 */
export function restoredState(
  trail: readonly DeadmanTrailEntry[],
  settings: DeadmanSettings | undefined,
  known: DeadmanRestoreHints = {},
): DeadmanState | undefined {
  let state: DeadmanState | undefined;
  for (const { position, at } of trail) {
    if (!position) state = undefined;
    else state = step(state && sweep(state, settings, at).state, position, settings, at);
  }
  if (!state) return state;
  if (known.silenceAlarmedSince === state.lastSeenAt) state = { ...state, firedSilence: true };
  const sessionFromTrailStart = state.insideBuildingSince === trail[0]!.at;
  if (known.truncated && sessionFromTrailStart) {
    state = {
      ...state,
      insideBuildingSince: Math.min(state.insideBuildingSince, state.lastSeenAt - (setting(settings?.deadmanAfterS) ?? 0) * 1000),
    };
  }
  const { stillAlarmedSince } = known;
  if (stillAlarmedSince === undefined) return state;
  if (
    stillAlarmedSince === state.anchor.at ||
    (sessionFromTrailStart && state.anchor.at === trail[0]!.at && stillAlarmedSince < state.anchor.at)
  ) {
    return {
      ...state,
      anchor: { ...state.anchor, at: stillAlarmedSince },
      insideBuildingSince: Math.min(state.insideBuildingSince, stillAlarmedSince),
      firedStill: true,
    };
  }
  return state;
}
