import * as deadman from '../../shared/detection/deadman.detector.js';
import * as maxStay from '../../shared/detection/max-stay.detector.js';
import * as transition from '../../shared/detection/transition.detector.js';
import type { ZoneEventRecord } from '../../shared/detection/zone-event.js';
import type { Zone, ZoneIndex, ZoneKind } from '../../shared/detection/zone-index.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { RaiseAlarm } from '../alarms/alarm-service.js';
import type { BuildingRegistry, BuildingRuntime } from '../realtime/building-registry.js';
import { detectionOf, type BuildingDetection } from './building-detection.js';

export interface TriggeredEvent {
  id: number;
  buildingId: number;
  name: string;
  info: string;
  url: string | null;
}

export interface Detections {
  zoneEvents: ZoneEventRecord[];
  alarms: Omit<RaiseAlarm, 'by'>[];
  /** Event trigger areas entered: their content goes to `devices/{id}` (plain data: it travels on the bus). */
  triggered: { organizationId: string; deviceId: string; userId?: string | null; event: TriggeredEvent }[];
}

export type { ZoneEventRecord };

export const emptyDetections = (): Detections => ({ zoneEvents: [], alarms: [], triggered: [] });

/** Small per-device state: what each detector remembers, plus who owns the device's sweeps. */
interface DeviceState {
  organizationId: string;
  deviceId: string;
  userId: string | null;
  buildingId: number | null;
  floorId: number | null;
  /** The newest position known (by fix time): where alarms are placed. */
  last: PositionRecord;
  /**
   * Fix time of the newest position run through the detectors here; older ones arriving late are ignored. Null
   * after a rebuild from storage: positions the previous owner may not have finished are then run again, and the
   * restored zone state decides whether they change anything (see `restore`).
   */
  observedThrough: number | null;
  /** After a rebuild, positions received before this are reflected in the stored zone events: ignored. */
  settledBefore: number;
  transition: transition.TransitionState;
  /** `transition` changed since max-stay last looked at it; otherwise max-stay has the same stays to check. */
  transitionChanged: boolean;
  maxStay: maxStay.MaxStayState;
  deadman?: deadman.DeadmanState;
}

const zoneKindOf = (zoneId: string): ZoneKind => (zoneId.startsWith('event:') ? 'event' : zoneId.startsWith('conversion:') ? 'conversion' : 'geofence');
const NO_RULES: transition.TransitionRules = new Map();

/** A device's detector state rebuilt from storage (gateway/detection/detector-state-loader.ts builds it). */
export interface RestoredDevice {
  /** The device's latest stored position, inside the building restored. */
  last: PositionRecord;
  transition: transition.TransitionState;
  maxStay: maxStay.MaxStayState;
  deadman?: deadman.DeadmanState;
  /**
   * The `at` of the device's latest stored zone event, the arrival of a position the previous owner had run:
   * positions received before it are settled (re-observing them would repeat what is stored).
   */
  settledBefore: number;
}

/** The max-stay state without stays other than those `inside` started (the same object when there are none). */
function staysOf(state: maxStay.MaxStayState, inside: ReadonlyMap<string, number>): maxStay.MaxStayState {
  let stays: Record<string, maxStay.Stay> | null = null;
  for (const zoneId in state.stays) {
    const enteredAt = inside.get(zoneId);
    if (enteredAt === undefined || enteredAt === state.stays[zoneId]!.enteredAt) continue;
    stays ??= { ...state.stays };
    delete stays[zoneId];
  }
  return stays ? { stays } : state;
}

/** Stamps kept at most (one per zone id met); past it they start again. */
const MAX_STAMPS = 1_000_000;

/**
 * The zone ids of one position, as the transition step reads them. Emptied by moving to the next stamp rather
 * than by clearing a Set: a cleared Set grows its table again, rehashing, for each of the tens of zones a
 * position meets at 10,000 fences, which made filling it the largest cost of a position.
 */
class TaggedZones implements transition.ZoneIdSet {
  private readonly zones: Zone[] = [];
  private readonly ids: string[] = [];
  /** The stamp of the position each zone id was last tagged for. */
  private readonly stamps = new Map<string, number>();
  private stamp = 0;

  of(index: ZoneIndex, floorId: number, x: number, y: number): this {
    if (++this.stamp > Number.MAX_SAFE_INTEGER - 1 || this.stamps.size > MAX_STAMPS) {
      this.stamps.clear();
      this.stamp = 1;
    }
    this.ids.length = 0;
    for (const zone of index.zonesAt(floorId, x, y, this.zones)) {
      this.ids.push(zone.id);
      this.stamps.set(zone.id, this.stamp);
    }
    return this;
  }

  get size(): number {
    return this.ids.length;
  }

  has(zoneId: string): boolean {
    return this.stamps.get(zoneId) === this.stamp;
  }

  [Symbol.iterator](): Iterator<string> {
    return this.ids[Symbol.iterator]();
  }
}

/** A change is remembered until max-stay has followed it. */
function setTransition(state: DeviceState, next: transition.TransitionState): void {
  if (next === state.transition) return;
  state.transition = next;
  state.transitionChanged = true;
}

/**
 * Runs the detectors over the positions of the buildings this gateway owns (gateway/cluster hands each building's
 * positions to its one owner), so what a position causes, and what a sweep finds, is emitted once, here.
 * Detection time is the server's arrival time (`receivedAt`), carried in the record so every gateway agrees.
 */
export class DetectionEngine {
  /** In least-recently-seen order (a device moves to the end at each position), so the first one is evicted. */
  private readonly devices = new Map<string, DeviceState>();
  /** Exits settled by evicting devices over the cap, emitted by the next sweep (an eviction has no caller to tell). */
  private evicted = emptyDetections();
  /** The zones of the position being observed: filled afresh for each, so tagging allocates nothing. */
  private readonly tagged = new TaggedZones();

  constructor(
    private readonly registry: BuildingRegistry,
    /** A silent device's state is settled (exits emitted) and dropped after this long: what a rebuild looks back over. */
    readonly forgetAfterMs: number,
    /** Devices kept at most; past it the least recently seen one is settled and forgotten, as a silent one would be. */
    private readonly maxDevices = 200_000,
  ) {}

  /** Devices whose detector state is held in memory (bounded by `maxDevices`). */
  get trackedDevices(): number {
    return this.devices.size;
  }

  /** What the position causes, added to `out` (a caller observing a batch collects it all in one). */
  observe(record: PositionRecord, runtime: BuildingRuntime | undefined, out: Detections = emptyDetections()): Detections {
    const key = `${record.organizationId}|${record.deviceId}`;
    const now = record.receivedAt;
    let state = this.devices.get(key);
    if (state && state.observedThrough !== null && state.observedThrough > record.timestamp) return out; // an older fix arriving late changes nothing live
    // Replayed after a rebuild: older than what the stored state already reflects, or from where the device was before.
    if (state && state.observedThrough === null && (record.receivedAt < state.settledBefore || (record.timestamp < state.last.timestamp && record.buildingId !== state.buildingId))) return out;
    if (!state) {
      state = {
        organizationId: record.organizationId,
        deviceId: record.deviceId,
        userId: record.userId,
        buildingId: null,
        floorId: null,
        last: record,
        observedThrough: null,
        settledBefore: 0,
        transition: transition.initialTransitionState(),
        transitionChanged: false,
        maxStay: maxStay.initialMaxStayState(),
      };
      this.devices.set(key, state);
      if (this.devices.size > this.maxDevices) this.evictOldest(now);
    } else {
      this.devices.delete(key);
      this.devices.set(key, state);
    }
    // Leaving a building (or its floors' coverage) closes every open stay there at once.
    if (state.buildingId !== null && state.buildingId !== record.buildingId) this.leaveBuilding(state, now, out);
    // Only a replay after a rebuild can be older than `last`: it may still enter or exit, but `last` and the
    // dead-man state stay with the newer stored position.
    const newest = record.timestamp >= state.last.timestamp;
    state.observedThrough = record.timestamp;
    if (newest) {
      state.last = record;
      state.userId = record.userId;
    }
    const detection = detectionOf(runtime);
    if (runtime && detection && record.floorId !== null && record.x !== null && record.y !== null) {
      state.buildingId = runtime.id;
      state.floorId = record.floorId;
      const zoneIds = this.tagged.of(detection.index, record.floorId, record.x, record.y);
      const stepped = transition.step(state.transition, { zoneIds, floorId: record.floorId }, detection.transitionRules, now);
      setTransition(state, stepped.state);
      this.collectTransitions(state, detection, stepped.transitions, out);
      this.checkMaxStay(state, detection, now, out);
      if (newest) state.deadman = deadman.observe(state.deadman, { x: record.x, y: record.y, floorId: record.floorId, buildingId: runtime.id }, detection.deadman, now);
    } else {
      state.buildingId = record.buildingId;
      state.floorId = null;
      state.deadman = undefined; // out of the building: neither stillness nor silence means anything
    }
    return out;
  }

  /** Devices whose detector state is held for this building. */
  trackedDevicesIn(buildingId: number): number {
    let count = 0;
    for (const state of this.devices.values()) if (state.buildingId === buildingId) count++;
    return count;
  }

  /** Drops every device state held for this building; emits nothing (the building moved to another owner). */
  forgetBuilding(buildingId: number): void {
    for (const [key, state] of this.devices) if (state.buildingId === buildingId) this.devices.delete(key);
  }

  /**
   * Takes a device's state rebuilt from storage, replacing what was held for it, unless what was held is newer
   * (this gateway has seen a later position of the device since). Its sweeps emit here: the building is owned
   * here. Positions re-observed afterwards are not dropped for being older than the restored `last`: the
   * restored zone state decides, so one whose enter or exit is stored changes nothing and one whose is not emits it.
   */
  restore(device: RestoredDevice): void {
    const { last } = device;
    const key = `${last.organizationId}|${last.deviceId}`;
    const held = this.devices.get(key);
    if (held && held.last.timestamp > last.timestamp) return;
    this.devices.delete(key);
    this.devices.set(key, {
      organizationId: last.organizationId,
      deviceId: last.deviceId,
      userId: last.userId,
      buildingId: last.buildingId,
      floorId: last.floorId,
      last,
      observedThrough: null,
      settledBefore: device.settledBefore,
      transition: device.transition,
      transitionChanged: false,
      maxStay: device.maxStay,
      deadman: device.deadman,
    });
    if (this.devices.size > this.maxDevices) this.evictOldest(last.receivedAt);
  }

  private evictOldest(now: number): void {
    const [key, state] = this.devices.entries().next().value!;
    this.leaveBuilding(state, now, this.evicted);
    this.devices.delete(key);
  }

  /** Timeouts that need no new position: pending debounces, stays running over, dead-man, forgotten devices. */
  sweep(now: number): Detections {
    const out = this.evicted;
    this.evicted = emptyDetections();
    for (const [key, state] of this.devices) {
      const runtime = state.buildingId !== null ? this.registry.peek(state.buildingId) : undefined;
      const detection = detectionOf(runtime);
      if (now - state.last.receivedAt > this.forgetAfterMs) {
        this.leaveBuilding(state, now, out);
        this.devices.delete(key);
        continue;
      }
      if (!detection) continue;
      const swept = transition.sweep(state.transition, detection.transitionRules, now);
      if (swept.transitions.length > 0) {
        setTransition(state, swept.state);
        this.collectTransitions(state, detection, swept.transitions, out);
      }
      this.checkMaxStay(state, detection, now, out);
      if (state.deadman) {
        const result = deadman.sweepDevice(state.deadman, detection.deadman, now);
        state.deadman = result.state;
        if (result.alarm) {
          out.alarms.push({
            ...this.alarmPlace(state),
            type: 'DEADMAN',
            // One condition, one alarm: a retry after an outage must not count it twice.
            idempotencyKey: `deadman|${state.deviceId}|${result.alarm.reason}|${result.alarm.since}`,
            details: { reason: result.alarm.reason, since: new Date(result.alarm.since).toISOString() },
          });
        }
      }
    }
    return out;
  }

  private leaveBuilding(state: DeviceState, now: number, out: Detections): void {
    const runtime = state.buildingId !== null ? this.registry.peek(state.buildingId) : undefined;
    const detection = detectionOf(runtime);
    const left = transition.step(state.transition, { zoneIds: [], floorId: null }, NO_RULES, now);
    if (detection) this.collectTransitions(state, detection, left.transitions, out);
    setTransition(state, transition.initialTransitionState());
    state.maxStay = maxStay.initialMaxStayState();
    state.deadman = undefined;
  }

  private collectTransitions(state: DeviceState, detection: BuildingDetection, transitions: readonly transition.ZoneTransition[], out: Detections): void {
    for (const change of transitions) {
      const zoneKind = zoneKindOf(change.zoneId);
      const event = zoneKind === 'geofence' ? undefined : detection.events.get(change.zoneId);
      const geofence = zoneKind === 'geofence' ? detection.geofences.get(change.zoneId) : undefined;
      out.zoneEvents.push({
        organizationId: state.organizationId,
        buildingId: state.buildingId!,
        floorId: state.floorId,
        zoneKind,
        zoneId: zoneKind === 'geofence' ? change.zoneId : String(event?.id ?? change.zoneId.split(':')[1]),
        zoneName: geofence?.name ?? event?.name ?? '',
        deviceId: state.deviceId,
        userId: state.userId,
        type: change.type,
        at: change.at,
        firedAt: change.firedAt,
      });
      if (zoneKind === 'event' && change.type === 'enter' && event) {
        out.triggered.push({
          organizationId: state.organizationId,
          deviceId: state.deviceId,
          userId: state.userId,
          event: { id: event.id, buildingId: event.buildingId, name: event.name, info: event.info, url: event.url ?? null },
        });
      }
    }
  }

  /**
   * Max-stay over the geofences confirmed inside. While the transition state is unchanged the stays are the same
   * and only time has moved (a sweep's check, allocation-free); after a change the stays follow the new set, so
   * a stay confirmed over by an exit (even one settled by a sweep) can no longer fire.
   *
   * A building without max-stay rules can raise nothing: its devices skip the check (at 10,000 fences it was the
   * largest cost of a position) and keep `transitionChanged`, so the stays catch up once a rule appears. Stays
   * that ended meanwhile are then told apart by their start: a stay is the transition's only if it began then.
   */
  private checkMaxStay(state: DeviceState, detection: BuildingDetection, now: number, out: Detections): void {
    if (detection.maxStayRules.size === 0) return;
    let result: maxStay.MaxStayResult;
    if (!state.transitionChanged) result = maxStay.sweep(state.maxStay, detection.maxStayRules, now);
    else {
      const inside = transition.confirmedInside(state.transition);
      for (const zoneId of [...inside.keys()]) if (zoneKindOf(zoneId) !== 'geofence') inside.delete(zoneId);
      result = maxStay.step(staysOf(state.maxStay, inside), { insideZoneIds: inside.keys(), enteredAt: inside, now }, detection.maxStayRules);
      state.transitionChanged = false;
    }
    state.maxStay = result.state;
    for (const alarm of result.alarms) {
      out.alarms.push({
        ...this.alarmPlace(state),
        type: 'GEOFENCE_MAX_STAY_TIME',
        geofenceId: alarm.zoneId,
        idempotencyKey: `max-stay|${state.deviceId}|${alarm.zoneId}|${alarm.enteredAt}`,
        details: { entered_at: new Date(alarm.enteredAt).toISOString(), stayed_s: Math.round(alarm.stayedS), max_stay_time: alarm.maxStayTimeS, geofence_name: detection.geofences.get(alarm.zoneId)?.name ?? null },
      });
    }
  }

  private alarmPlace(state: DeviceState): Omit<RaiseAlarm, 'by' | 'type'> {
    const last = state.last;
    return {
      organizationId: state.organizationId,
      deviceId: state.deviceId,
      userId: state.userId,
      buildingId: state.buildingId,
      floorId: last.floorId,
      x: last.x,
      y: last.y,
      lat: last.lat,
      lng: last.lng,
    };
  }
}
