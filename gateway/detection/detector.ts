import type { AlarmState } from '../../shared/detection/alarm-states.js';
import type { DeadmanRestoreHints, DeadmanTrailEntry } from '../../shared/detection/deadman.detector.js';
import type { ZoneKind } from '../../shared/detection/zone-index.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { RaiseAlarm } from '../alarms/alarm-service.js';
import type { BuildingDetection, BuildingDetections } from './building-detection.js';
import type { Detections } from './detections.js';

/**
 * The one shape of a detector. Adding one is a file in detectors/ that implements `Detector` and a line in the list
 * of detectors/index.ts: the engine (detection-engine.ts) keeps each device's state of every detector of the list,
 * in the list's order, and runs them all, in that order, at each moment below. The rules themselves
 * are pure functions (shared/detection/*.detector.ts); a detector feeds them and turns what they find into zone
 * events and alarms (`out`).
 */
export interface Detector<S = unknown> {
  /** What names it (another detector reading its state asks for it by name: `DetectorContext.stateOf`). */
  readonly name: string;
  /**
   * `event`: it judges fixes on their fix time, so the late path (late-detection.ts) re-runs it, and here it skips
   * the fixes the late path takes over, and the sweeps while it does. `arrival`: the server's clock, every fix and sweep.
   */
  readonly clock: 'event' | 'arrival';
  /** Its state of a device it knows nothing of: one first seen, or gone from its building. */
  initial(): S;
  /** One fix of the device; the new state (the same object when nothing changed, so the common case allocates nothing). */
  observe(state: S, fix: Fix, out: Detections): S;
  /** Timeouts that need no fix: once a second, for every device in a building detected here. */
  sweep(state: S, sweep: Sweep, out: Detections): S;
  /** The device leaves its building, or is forgotten: what that settles (its state then starts again from `initial`). */
  leave?(state: S, leave: Leave, out: Detections): void;
  /** Its state rebuilt from storage (a start, a takeover); `device.states` holds those of the detectors before it in the list. */
  restore(stored: StoredDevice, device: DetectedDevice): S;
  /** After every device of a sweep: what it judges per building. */
  swept?(now: number, out: Detections): void;
  /** What it holds per building, read back from storage at a rebuild. */
  restoreBuilding?(organizationId: string, buildingId: number, stored: StoredBuilding): void;
  /** Alarm events of every gateway (the bus `alarms` channel). */
  alarmsChanged?(changes: readonly AlarmChange[]): void;
  /** The building moved to another owner: what is held for it is dropped, emitting nothing. */
  forgetBuilding?(buildingId: number): void;
}

/** Every detector's state of a device, in the order of the list (a detector reads another's through `DetectorContext.stateOf`). */
export type DetectorStates = unknown[];

/** A device as the detectors see it (the engine's own bookkeeping aside). */
export interface DetectedDevice {
  readonly organizationId: string;
  readonly deviceId: string;
  readonly userId: string | null;
  readonly buildingId: number | null;
  readonly floorId: number | null;
  /** The newest position known (by fix time): where alarms are placed. */
  readonly last: PositionRecord;
  readonly states: DetectorStates;
}

/** What a detector's construction is given (detectors/index.ts). */
export interface DetectorContext {
  /** What each zone key names, and each building's detection. */
  buildings: BuildingDetections;
  /** The detection of a building held by the registry (undefined when it is not loaded). */
  detectionOf(buildingId: number): BuildingDetection | undefined;
  /**
   * How to read, from a device, the state of the detector of that name, which must come earlier in the list (stays
   * follow the zones confirmed): fails at construction otherwise.
   */
  stateOf<S>(name: string): (device: DetectedDevice) => S;
}

/**
 * One fix, as every detector is handed it: one object, filled afresh for each fix. The device is already where the
 * fix puts it (building, floor; its `last` and user when the fix is its newest).
 */
export interface Fix {
  device: DetectedDevice;
  record: PositionRecord;
  /** Its building's detection when the fix has floor coordinates in a building detected here; otherwise undefined. */
  detection: BuildingDetection | undefined;
  /** With `detection`: the building and the floor coordinates. */
  buildingId: number;
  floorId: number;
  x: number;
  y: number;
  /** The device's newest fix (only a replay after a rebuild can be older): what the server's clock follows. */
  newest: boolean;
  /** The device's `last` and user before this fix: where what it ends is placed (a silence it ends). */
  previous: PositionRecord;
  previousUserId: string | null;
}

/** One device at a sweep (one object, filled afresh for each device). */
export interface Sweep {
  device: DetectedDevice;
  detection: BuildingDetection;
  /** The server's clock. */
  now: number;
  /** The device's event time now: its newest fix, carried forward by the time since that fix arrived. */
  eventNow: number;
  /** On the server's clock: since when its building has been watched without a break of ours. */
  watchedSince: number;
}

/** A device leaving its building (or forgotten). */
export interface Leave {
  device: DetectedDevice;
  /** Of the building it leaves, when still loaded (none: nothing is emitted). */
  detection: BuildingDetection | undefined;
  /** Event time. */
  at: number;
}

/** A zone whose latest stored event is an enter. */
export interface StoredStay {
  kind: ZoneKind;
  /** The enter's `at`. */
  enteredAt: number;
  /** A geofence's stay whose max-stay alarm is stored. */
  alarmed: boolean;
}

/** What storage says of a device whose detection is rebuilt (gateway/detection/detector-state-loader.ts reads it). */
export interface StoredDevice {
  /** The device's latest stored position, inside the building restored. */
  last: PositionRecord;
  /** That building's detection. */
  detection: BuildingDetection | undefined;
  /** By zone key. */
  stays: ReadonlyMap<string, StoredStay>;
  /** The device's latest stored positions, oldest first, and what its stored dead-man alarms say. */
  trail: readonly DeadmanTrailEntry[];
  deadman: DeadmanRestoreHints;
  /**
   * The `at` of the device's latest stored zone event, the fix time of a position the previous owner had run:
   * fixes taken before it are settled (re-observing them would repeat what is stored).
   */
  settledBefore: number;
}

/** What storage says of a building whose detection is rebuilt. */
export interface StoredBuilding {
  /** The details of its BUILDING_SILENT alarm not yet closed, if any. */
  silentAlarm?: Record<string, unknown>;
}

/** An alarm event as the bus carries it, as far as detectors need it (gateway/alarms/alarm-service.ts). */
export interface AlarmChange {
  event: { type: string; state: AlarmState; building_id: number | null; details: Record<string, unknown> };
}

/** An alarm about the device, placed where `last` puts it. */
export function alarmPlace(device: DetectedDevice, last = device.last, userId = device.userId): Omit<RaiseAlarm, 'by' | 'type'> {
  return {
    organizationId: device.organizationId,
    deviceId: device.deviceId,
    userId,
    buildingId: device.buildingId,
    floorId: last.floorId,
    x: last.x,
    y: last.y,
    lat: last.lat,
    lng: last.lng,
  };
}
