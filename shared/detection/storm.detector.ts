/**
 * BUILDING_SILENT: many of a building's devices falling silent together is an infrastructure failure (Wi-Fi, a
 * gateway, the app's backend), not many people down, so it is one building alarm instead of a DEADMAN each.
 *
 * - The building's tally, at each sweep: its recently active devices (heard from within two silence windows,
 *   measured as dead-man silence is, from the later of the last position and our own return) and, among them,
 *   the quiet ones (not heard from for more than half a window: they stopped together with those now due).
 * - A storm starts when a device's silence falls due while the quiet are at least `stormMinDevices` and more
 *   than `stormShare` of the recently active (defaults 5 and 0.5). The silence alarms due then are held by the
 *   storm instead of raised; while it stands, every silence that falls due in the building joins it too.
 * - A member that reports again leaves it (its held alarm is dropped). When the building alarm is closed, the
 *   storm ends and the alarms of the members still silent are raised then, each its own DEADMAN.
 * Pure: the dead-man detector (gateway/detection/detectors/deadman.ts) tallies, holds the storms and emits.
 */
export interface StormSettings {
  stormShare?: number | null;
  stormMinDevices?: number | null;
}

export const DEFAULT_STORM_SHARE = 0.5;
export const DEFAULT_STORM_MIN_DEVICES = 5;

/** A building's devices as one sweep counts them. */
export interface StormTally {
  active: number;
  quiet: number;
}

/** A storm in progress: when it started (its alarm's key) and, per member device, the alarm it holds back. */
export interface Storm<A> {
  startedAt: number;
  members: Map<string, A>;
}

export const emptyTally = (): StormTally => ({ active: 0, quiet: 0 });

/** Counts a device, silent for `silentMs` (from the later of its last position and our return), into its building's tally. */
export function count(tally: StormTally, silentMs: number, silenceS: number): void {
  if (silentMs > 2 * silenceS * 1000) return;
  tally.active++;
  if (silentMs > (silenceS * 1000) / 2) tally.quiet++;
}

export function isStorm(tally: StormTally, settings: StormSettings | undefined): boolean {
  const share = settings?.stormShare ?? DEFAULT_STORM_SHARE;
  const minDevices = settings?.stormMinDevices ?? DEFAULT_STORM_MIN_DEVICES;
  return tally.quiet >= minDevices && tally.quiet > share * tally.active;
}

export interface Judgement<A> {
  /** The storm after this sweep (undefined: none). */
  storm?: Storm<A>;
  /** True when it started at this sweep (its alarm is to be raised). */
  started: boolean;
  /** Devices that joined it at this sweep. */
  joined: string[];
  /** Silence alarms to raise as they are (no storm). */
  alarms: A[];
}

/** One building at one sweep: the silence alarms due now (by device), held by a storm or raised as they are. */
export function judge<A>(
  storm: Storm<A> | undefined,
  tally: StormTally,
  due: ReadonlyMap<string, A>,
  settings: StormSettings | undefined,
  now: number,
): Judgement<A> {
  if (due.size === 0) return { storm, started: false, joined: [], alarms: [] };
  const started = storm === undefined && isStorm(tally, settings);
  if (!storm && !started) return { storm, started: false, joined: [], alarms: [...due.values()] };
  const members = new Map(storm?.members);
  for (const [deviceId, alarm] of due) members.set(deviceId, alarm);
  return { storm: { startedAt: storm?.startedAt ?? now, members }, started, joined: [...due.keys()], alarms: [] };
}

/** A member reported again: the storm without it (the same object when it was no member). */
export function leave<A>(storm: Storm<A>, deviceId: string): Storm<A> {
  if (!storm.members.has(deviceId)) return storm;
  const members = new Map(storm.members);
  members.delete(deviceId);
  return { startedAt: storm.startedAt, members };
}
