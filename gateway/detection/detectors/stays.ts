import * as maxStay from '../../../shared/detection/max-stay.detector.js';
import * as transition from '../../../shared/detection/transition.detector.js';
import type { RaiseAlarm } from '../../alarms/alarm-service.js';
import type { BuildingDetection, BuildingDetections } from '../building-detection.js';
import {
  alarmPlace,
  type DetectedDevice,
  type Detector,
  type DetectorContext,
  type Fix,
  type StoredDevice,
  type Sweep,
} from '../detector.js';
import type { DetectedAlarm, Detections } from '../detections.js';
import { ZONES } from './zones.js';

/**
 * A max-stay alarm at `place`, keyed by its stay (one alarm per stay, whoever finds it: the live path, a sweep, the
 * late path). `occurredAt`: the event time it was found over at.
 */
export function maxStayAlarmOf(
  place: Omit<RaiseAlarm, 'by' | 'type'>,
  detection: BuildingDetection,
  alarm: maxStay.MaxStayAlarm,
  occurredAt: number,
  late?: { delayMs: number },
): DetectedAlarm {
  return {
    ...place,
    type: 'GEOFENCE_MAX_STAY_TIME',
    geofenceId: alarm.zoneId,
    idempotencyKey: `max-stay|${place.deviceId}|${alarm.zoneId}|${alarm.enteredAt}`,
    details: {
      entered_at: new Date(alarm.enteredAt).toISOString(),
      stayed_s: Math.round(alarm.stayedS),
      max_stay_time: alarm.maxStayTimeS,
      geofence_name: detection.geofences.get(alarm.zoneId)?.name ?? null,
      occurred_at: new Date(occurredAt).toISOString(),
      ...(late ? { late: true, delay_ms: Math.round(late.delayMs) } : {}),
    },
  };
}

/** The max-stay state without stays other than those `inside` started (the same object when there are none). */
export function staysOf(state: maxStay.MaxStayState, inside: ReadonlyMap<string, number>): maxStay.MaxStayState {
  let stays: Record<string, maxStay.Stay> | null = null;
  for (const zoneId in state.stays) {
    const enteredAt = inside.get(zoneId);
    if (enteredAt === undefined || enteredAt === state.stays[zoneId]!.enteredAt) continue;
    stays ??= { ...state.stays };
    delete stays[zoneId];
  }
  return stays ? { stays } : state;
}

/** The geofences of the zones confirmed inside (event and conversion areas have no stays), with each stay's start. */
export function fencesInside(zones: transition.TransitionState, buildings: BuildingDetections): Map<string, number> {
  const inside = transition.confirmedInside(zones);
  for (const zoneId of [...inside.keys()]) if (buildings.zoneOf(zoneId).kind !== 'geofence') inside.delete(zoneId);
  return inside;
}

/**
 * The device's stays, and the zone state they last followed: while the zones are the same object the stays are
 * the same and only time has moved. Owned by the device's entry, so updated in place.
 */
export interface StaysState {
  stays: maxStay.MaxStayState;
  followed: transition.TransitionState | null;
}

/** Stays the late path replayed: they follow the zones afresh at the next look. */
export const replayedStays = (stays: maxStay.MaxStayState): StaysState => ({ stays, followed: null });

export const STAYS = 'stays';

/**
 * GEOFENCE_MAX_STAY_TIME over the geofences the zone detector confirmed inside (shared/detection/max-stay.detector.ts),
 * on fix time. After a change of zones the stays follow the new set, so a stay confirmed over by an exit (even one
 * settled by a sweep) can no longer fire; otherwise only time has moved (a sweep's check, allocation-free).
 *
 * A building without max-stay rules can raise nothing: its devices skip the check (at 10,000 fences it was the
 * largest cost of a position) and the stays catch up once a rule appears. Stays that ended meanwhile are then told
 * apart by their start: a stay is the zones' only if it began then.
 */
export class StayDetector implements Detector<StaysState> {
  readonly name = STAYS;
  readonly clock = 'event' as const;
  private readonly buildings: BuildingDetections;
  /** The device's zones as the zone detector holds them. */
  private readonly zonesOf: (device: DetectedDevice) => transition.TransitionState;

  constructor(context: DetectorContext) {
    this.buildings = context.buildings;
    this.zonesOf = context.stateOf(ZONES);
  }

  initial(): StaysState {
    return { stays: maxStay.initialMaxStayState(), followed: null };
  }

  observe(state: StaysState, fix: Fix, out: Detections): StaysState {
    if (fix.detection) this.check(state, fix.device, fix.detection, fix.record.timestamp, out);
    return state;
  }

  /** From a sweep, the stays may be assumed to have lasted from the device's last fix, unless we were away since. */
  sweep(state: StaysState, sweep: Sweep, out: Detections): StaysState {
    const { device } = sweep;
    const offset = device.last.timestamp - device.last.receivedAt;
    this.check(state, device, sweep.detection, sweep.eventNow, out, {
      lastSeenAt: device.last.timestamp,
      watchedSince: sweep.watchedSince + offset,
    });
    return state;
  }

  /** One stay per geofence whose latest stored event is an enter, fired when its alarm is stored; following the zones restored. */
  restore(stored: StoredDevice, device: DetectedDevice): StaysState {
    const fences = new Map<string, number>();
    const alarmed = new Set<string>();
    for (const [zoneId, stay] of stored.stays) {
      if (stay.kind !== 'geofence') continue;
      fences.set(zoneId, stay.enteredAt);
      if (stay.alarmed) alarmed.add(zoneId);
    }
    return { stays: maxStay.restoredState(fences, alarmed), followed: this.zonesOf(device) };
  }

  private check(
    state: StaysState,
    device: DetectedDevice,
    detection: BuildingDetection,
    now: number,
    out: Detections,
    watch?: maxStay.Watch,
  ): void {
    if (detection.maxStayRules.size === 0) return;
    const zones = this.zonesOf(device);
    let result: maxStay.MaxStayResult;
    if (zones === state.followed) result = maxStay.sweep(state.stays, detection.maxStayRules, now, watch);
    else {
      const inside = fencesInside(zones, this.buildings);
      result = maxStay.step(
        staysOf(state.stays, inside),
        { insideZoneIds: inside.keys(), enteredAt: inside, now, watch },
        detection.maxStayRules,
      );
      state.followed = zones;
    }
    state.stays = result.state;
    for (const alarm of result.alarms) out.alarms.push(maxStayAlarmOf(alarmPlace(device), detection, alarm, now));
  }
}
