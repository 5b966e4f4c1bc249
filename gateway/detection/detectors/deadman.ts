import { isFinalAlarmState } from '../../../shared/detection/alarm-states.js';
import * as deadman from '../../../shared/detection/deadman.detector.js';
import * as storm from '../../../shared/detection/storm.detector.js';
import type { RaiseAlarm } from '../../alarms/alarm-service.js';
import type { BuildingDetection } from '../building-detection.js';
import {
  alarmPlace,
  type AlarmChange,
  type Detector,
  type DetectorContext,
  type Fix,
  type StoredBuilding,
  type StoredDevice,
  type Sweep,
} from '../detector.js';
import type { DetectedAlarm, Detections } from '../detections.js';

/** A building's silence storm as held here: the DEADMANs it holds back, and whether its alarm owes an update or was closed. */
interface HeldStorm {
  organizationId: string;
  storm: storm.Storm<DetectedAlarm>;
  silenceS: number;
  changed: boolean;
  closed: boolean;
}

/** One member of a storm, as its building alarm lists it. */
interface StormMember {
  device_id: string;
  user_id: string | null;
  since: string;
  floor_id: number | null;
  x: number | null;
  y: number | null;
}

const NOT_RESTORED = Object.freeze({ contact_restored_at: null, contact_restored_position: null });

/** A DEADMAN as the sweep raises it (and a storm holds it), at the device's place. */
function deadmanAlarm(place: Omit<RaiseAlarm, 'by' | 'type'>, reason: deadman.DeadmanReason, since: number): DetectedAlarm {
  return {
    ...place,
    type: 'DEADMAN',
    // One condition, one alarm: a retry after an outage must not count it twice.
    idempotencyKey: `deadman|${place.deviceId}|${reason}|${since}`,
    // A repeat folded into the OPEN alarm of an earlier silence is silent again: no longer restored.
    details: { reason, since: new Date(since).toISOString(), ...(reason === 'silence' ? NOT_RESTORED : {}) },
  };
}

/** What a building alarm says of its storm's members: the devices still silent, each with since when and where. */
function stormMembers(held: storm.Storm<DetectedAlarm>): Record<string, unknown> {
  const devices: StormMember[] = [...held.members.values()].map((alarm) => ({
    device_id: alarm.deviceId!,
    user_id: alarm.userId ?? null,
    since: alarm.details!.since as string,
    floor_id: alarm.floorId ?? null,
    x: alarm.x ?? null,
    y: alarm.y ?? null,
  }));
  return { silent_count: devices.length, devices };
}

/**
 * DEADMAN (shared/detection/deadman.detector.ts) on the server's clock: positions only move the device's anchor
 * (out of every building it has none: neither stillness nor silence means anything there); sweeps raise stillness
 * at once, and hand each silence to its building's storm judgement (BUILDING_SILENT, shared/detection/storm.detector.ts)
 * once every device of the sweep is counted. A position after a raised silence tells its alarm that contact is back.
 */
export class DeadmanDetector implements Detector<deadman.DeadmanState | undefined> {
  readonly name = 'deadman';
  readonly clock = 'arrival' as const;
  /** Silence storms of the buildings owned here, by building. */
  private readonly storms = new Map<number, HeldStorm>();
  /** Of the sweep under way, per building: its devices as a storm counts them, and the silence alarms due now. */
  private readonly tallies = new Map<number, storm.StormTally>();
  private readonly due = new Map<number, Map<string, DetectedAlarm>>();
  private readonly detectionOf: (buildingId: number) => BuildingDetection | undefined;

  constructor(context: DetectorContext) {
    this.detectionOf = context.detectionOf;
  }

  initial(): deadman.DeadmanState | undefined {
    return undefined;
  }

  observe(state: deadman.DeadmanState | undefined, fix: Fix, out: Detections): deadman.DeadmanState | undefined {
    if (fix.newest && state && deadman.contactRestored(state)) this.restoreContact(state, fix, out);
    if (!fix.detection) return undefined;
    if (!fix.newest) return state;
    return deadman.step(
      state,
      { x: fix.x, y: fix.y, floorId: fix.floorId, buildingId: fix.buildingId },
      fix.detection.deadman,
      fix.record.receivedAt,
    );
  }

  sweep(state: deadman.DeadmanState | undefined, sweep: Sweep, out: Detections): deadman.DeadmanState | undefined {
    if (!state) return state;
    const { detection, now, watchedSince } = sweep;
    const silenceS = detection.deadman.deadmanSilenceS;
    const buildingId = state.buildingId;
    if (silenceS != null && silenceS > 0) {
      const tally = this.tallies.get(buildingId) ?? this.tallies.set(buildingId, storm.emptyTally()).get(buildingId)!;
      storm.count(tally, now - Math.max(state.lastSeenAt, watchedSince), silenceS);
    }
    const result = deadman.sweep(state, detection.deadman, now, watchedSince);
    if (result.alarm) {
      // A silence waits for the building's tally (a storm holds it); stillness is raised at once.
      const alarm = deadmanAlarm(alarmPlace(sweep.device), result.alarm.reason, result.alarm.since);
      if (result.alarm.reason === 'silence')
        (this.due.get(buildingId) ?? this.due.set(buildingId, new Map()).get(buildingId)!).set(sweep.device.deviceId, alarm);
      else out.alarms.push(alarm);
    }
    return result.state;
  }

  /** The device's latest positions replayed, with what its stored alarms say was already raised. */
  restore(stored: StoredDevice): deadman.DeadmanState | undefined {
    return deadman.restoredState(stored.trail, stored.detection?.deadman, stored.deadman);
  }

  swept(now: number, out: Detections): void {
    for (const buildingId of new Set([...this.due.keys(), ...this.storms.keys()]))
      this.judgeStorm(buildingId, this.tallies.get(buildingId) ?? storm.emptyTally(), this.due.get(buildingId) ?? new Map(), now, out);
    this.tallies.clear();
    this.due.clear();
  }

  /** A storm read back from its building alarm: its members' silence alarms are held by it again. */
  restoreBuilding(organizationId: string, buildingId: number, stored: StoredBuilding): void {
    const details = stored.silentAlarm;
    const startedAt = typeof details?.started_at === 'string' ? Date.parse(details.started_at) : NaN;
    if (!details || !Number.isFinite(startedAt)) return;
    const members = new Map<string, DetectedAlarm>();
    for (const member of Array.isArray(details.devices) ? (details.devices as StormMember[]) : []) {
      const since = typeof member.since === 'string' ? Date.parse(member.since) : NaN;
      if (typeof member.device_id !== 'string' || !Number.isFinite(since)) continue;
      const place = {
        organizationId,
        deviceId: member.device_id,
        userId: member.user_id,
        buildingId,
        floorId: member.floor_id,
        x: member.x,
        y: member.y,
        lat: null,
        lng: null,
      };
      members.set(member.device_id, deadmanAlarm(place, 'silence', since));
    }
    this.storms.set(buildingId, {
      organizationId,
      storm: { startedAt, members },
      silenceS: Number(details.silence_s) || 0,
      changed: false,
      closed: false,
    });
  }

  /** A building alarm closed ends its storm, whose members still silent get their DEADMAN at the next sweep. */
  alarmsChanged(changes: readonly AlarmChange[]): void {
    for (const { event } of changes) {
      if (event.type !== 'BUILDING_SILENT' || event.building_id === null || !isFinalAlarmState(event.state)) continue;
      const held = this.storms.get(event.building_id);
      if (held && typeof event.details.started_at === 'string' && Date.parse(event.details.started_at) === held.storm.startedAt)
        held.closed = true;
    }
  }

  forgetBuilding(buildingId: number): void {
    this.storms.delete(buildingId);
  }

  /**
   * One building after a sweep: a closed storm releases the DEADMANs of its members still silent; the silence
   * alarms due now are raised, or held by a storm (starting one when the tally says so); a storm whose members
   * changed updates its alarm.
   */
  private judgeStorm(buildingId: number, tally: storm.StormTally, due: Map<string, DetectedAlarm>, now: number, out: Detections): void {
    let held = this.storms.get(buildingId);
    if (held?.closed) {
      out.alarms.push(...held.storm.members.values());
      this.storms.delete(buildingId);
      held = undefined;
    }
    const detection = this.detectionOf(buildingId);
    // A storm whose members all came back holds nothing more: what falls due next is judged afresh.
    const standing = held && held.storm.members.size > 0 ? held.storm : undefined;
    const judged = storm.judge(standing, tally, due, detection?.storm, now);
    out.alarms.push(...judged.alarms);
    if (!judged.storm) {
      if (held?.changed) {
        out.alarms.push({
          organizationId: held.organizationId,
          type: 'BUILDING_SILENT',
          deviceId: null,
          buildingId,
          onlyIfOpen: true,
          idempotencyKey: `building-silent|${buildingId}|${held.storm.startedAt}|${now}`,
          details: stormMembers(held.storm),
        });
        held.changed = false;
      }
      return;
    }
    if (judged.started) held = undefined;
    const organizationId = held?.organizationId ?? [...due.values()][0]!.organizationId;
    const silenceS = detection?.deadman.deadmanSilenceS ?? held?.silenceS ?? 0;
    const changed = (held?.changed ?? false) || judged.joined.length > 0;
    this.storms.set(buildingId, { organizationId, storm: judged.storm, silenceS, changed: false, closed: false });
    const key = `building-silent|${buildingId}|${judged.storm.startedAt}`;
    if (judged.started) {
      out.alarms.push({
        organizationId,
        type: 'BUILDING_SILENT',
        deviceId: null,
        buildingId,
        idempotencyKey: key,
        details: { started_at: new Date(judged.storm.startedAt).toISOString(), silence_s: silenceS, ...stormMembers(judged.storm) },
      });
    } else if (changed) {
      out.alarms.push({
        organizationId,
        type: 'BUILDING_SILENT',
        deviceId: null,
        buildingId,
        onlyIfOpen: true,
        idempotencyKey: `${key}|${now}`,
        details: stormMembers(judged.storm),
      });
    }
  }

  /**
   * The device's silence alarm, if still OPEN, learns that it reported again, and where (its place stays where it
   * fell silent); a storm's member leaves the storm.
   */
  private restoreContact(state: deadman.DeadmanState, fix: Fix, out: Detections): void {
    const { device, record } = fix;
    const held = this.storms.get(state.buildingId);
    if (held?.storm.members.has(device.deviceId)) {
      // Back from a storm: it leaves it (the building alarm says so at the next sweep); it has no DEADMAN of its own to update.
      held.storm = storm.leave(held.storm, device.deviceId);
      held.changed = true;
      return;
    }
    const hasCartesians = record.x !== null && record.y !== null;
    out.alarms.push({
      ...alarmPlace(device, fix.previous, fix.previousUserId),
      type: 'DEADMAN',
      onlyIfOpen: true,
      idempotencyKey: `deadman-contact|${device.deviceId}|${record.receivedAt}`,
      details: {
        contact_restored_at: new Date(record.receivedAt).toISOString(),
        contact_restored_position: {
          building_id: record.buildingId,
          floor_id: record.floorId,
          cartesians: hasCartesians ? { x: record.x, y: record.y } : null,
          georeferences: { lat: record.lat, lng: record.lng },
        },
      },
    });
  }
}
