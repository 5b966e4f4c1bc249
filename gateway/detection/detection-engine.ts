import * as deadman from '../../shared/detection/deadman.detector.js';
import { isFinalAlarmState, type AlarmState } from '../../shared/detection/alarm-states.js';
import * as maxStay from '../../shared/detection/max-stay.detector.js';
import * as storm from '../../shared/detection/storm.detector.js';
import * as transition from '../../shared/detection/transition.detector.js';
import type { Zone, ZoneIndex, ZoneKind } from '../../shared/detection/zone-index.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { RaiseAlarm } from '../alarms/alarm-service.js';
import type { BuildingRegistry, BuildingRuntime } from '../realtime/building-registry.js';
import { BuildingDetections, type BuildingDetection } from './building-detection.js';
import { emptyDetections, type DetectedAlarm, type Detections, type ZoneEventRecord } from './detections.js';

/** A building's silence storm as held here: the DEADMANs it holds back, and whether its alarm owes an update or was closed. */
interface HeldStorm {
  organizationId: string;
  storm: storm.Storm<DetectedAlarm>;
  silenceS: number;
  changed: boolean;
  closed: boolean;
}

/** An alarm event as the bus carries it, as far as storms need it (gateway/alarms/alarm-service.ts). */
export interface AlarmChange {
  event: { type: string; state: AlarmState; building_id: number | null; details: Record<string, unknown> };
}

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
   * Fix time of the newest position run through the detectors here; older ones arriving late go to the late path
   * (late-detection.ts), never through the live state. Null after a rebuild from storage: positions the previous
   * owner may not have finished are then run again, and the restored zone state decides whether they change
   * anything (see `restore`).
   */
  observedThrough: number | null;
  /** After a rebuild, fixes taken before this are reflected in the stored zone events: ignored. */
  settledBefore: number;
  /**
   * The device's event time at the last sweep that settled something for it (a debounce, a max-stay) on its clock
   * carried forward: a fix taken before it, even newer than any run, may contradict what the sweep assumed.
   */
  sweptTo: number;
  /**
   * Its fixes wait for the late path, which reads what is stored and then hands back the state: a sweep meanwhile
   * would judge zones and stays the replay is about to replace, and what it stored then would escape the replay.
   */
  replaying: boolean;
  transition: transition.TransitionState;
  /** `transition` changed since max-stay last looked at it; otherwise max-stay has the same stays to check. */
  transitionChanged: boolean;
  maxStay: maxStay.MaxStayState;
  deadman?: deadman.DeadmanState;
}

export const zoneKindOf = (zoneId: string): ZoneKind =>
  zoneId.startsWith('event:') ? 'event' : zoneId.startsWith('conversion:') ? 'conversion' : 'geofence';
const NO_RULES: transition.TransitionRules = new Map();
const NOT_RESTORED = Object.freeze({ contact_restored_at: null, contact_restored_position: null });

/** A device's detector state rebuilt from storage (gateway/detection/detector-state-loader.ts builds it). */
export interface RestoredDevice {
  /** The device's latest stored position, inside the building restored. */
  last: PositionRecord;
  transition: transition.TransitionState;
  maxStay: maxStay.MaxStayState;
  deadman?: deadman.DeadmanState;
  /**
   * The `at` of the device's latest stored zone event, the fix time of a position the previous owner had run:
   * fixes taken before it are settled (re-observing them would repeat what is stored).
   */
  settledBefore: number;
}

/** Who and where a zone event is about: the device and the floor of the fix that decided it. */
export interface ZoneEventSubject {
  organizationId: string;
  buildingId: number;
  floorId: number | null;
  deviceId: string;
  userId: string | null;
}

/** The stored and pushed form of one transition (zone ids as the detectors name them; names from the building). */
export function zoneEventOf(subject: ZoneEventSubject, detection: BuildingDetection, change: transition.ZoneTransition): ZoneEventRecord {
  const zoneKind = zoneKindOf(change.zoneId);
  const event = zoneKind === 'geofence' ? undefined : detection.events.get(change.zoneId);
  const geofence = zoneKind === 'geofence' ? detection.geofences.get(change.zoneId) : undefined;
  return {
    organizationId: subject.organizationId,
    buildingId: subject.buildingId,
    floorId: subject.floorId,
    zoneKind,
    zoneId: zoneKind === 'geofence' ? change.zoneId : String(event?.id ?? change.zoneId.split(':')[1]),
    zoneName: geofence?.name ?? event?.name ?? '',
    deviceId: subject.deviceId,
    userId: subject.userId,
    type: change.type,
    at: change.at,
    firedAt: change.firedAt,
  };
}

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

/** One member of a storm, as its building alarm lists it. */
interface StormMember {
  device_id: string;
  user_id: string | null;
  since: string;
  floor_id: number | null;
  x: number | null;
  y: number | null;
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
 *
 * Zones and stays run in event time: a position's clock is its fix time (`timestamp`), so the same fixes give the
 * same enters, exits and max-stay alarms whenever they arrive (docs/event-time.md). A sweep judges each device on
 * its own clock carried forward by the time since its newest fix arrived (`eventNow`), which also absorbs a
 * device clock that is off. Dead-man silence is about arrival, so it keeps the server's clock (`receivedAt`).
 * A fix older than the device's newest one run here is not observed: the caller gives it to the late path.
 */
export class DetectionEngine {
  /** In least-recently-seen order (a device moves to the end at each position), so the first one is evicted. */
  private readonly devices = new Map<string, DeviceState>();
  /** Exits settled by evicting devices over the cap, emitted by the next sweep (an eviction has no caller to tell). */
  private evicted = emptyDetections();
  /** The zones of the position being observed: filled afresh for each, so tagging allocates nothing. */
  private readonly tagged = new TaggedZones();
  /**
   * When detection of each building last resumed here (its rebuild at start or takeover), and of every building
   * (storage back after an outage): silence and stays are not counted across our own absence before it.
   */
  private readonly resumedAt = new Map<number, number>();
  private allResumedAt = -Infinity;
  /** Storage is out of reach: no position can be taken, so nobody is watching (see `interrupt`). */
  private interrupted = false;
  /** Silence storms of the buildings owned here, by building (shared/detection/storm.detector.ts). */
  private readonly storms = new Map<number, HeldStorm>();
  /** Each building's zones and rules, as the detectors read them. */
  readonly buildings = new BuildingDetections();

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

  /**
   * What the position causes, added to `out` (a caller observing a batch collects it all in one). A fix older than
   * the device's newest one run here changes nothing live: it is pushed onto `late` (when given) for the late path.
   */
  observe(
    record: PositionRecord,
    runtime: BuildingRuntime | undefined,
    out: Detections = emptyDetections(),
    late?: PositionRecord[],
  ): Detections {
    const key = `${record.organizationId}|${record.deviceId}`;
    const now = record.receivedAt;
    const at = record.timestamp;
    let state = this.devices.get(key);
    if (state && state.observedThrough !== null && state.observedThrough > at) {
      if (late) {
        late.push(record);
        state.replaying = true;
      }
      return out;
    }
    // Rebuilt from storage (a takeover, a restart) and nothing run here since: the zone state restored lacks any
    // dwell or grace under way when it was lost, and the previous owner may have died with a buffer taken but not
    // detected. With a late path, zones and stays of the device's fixes go there, which replays them from the
    // stored fixes before them (what it finds already stored, it does not store twice) and hands back the state;
    // the rest (its place, dead-man) is followed here. Without one, as before the late path: a fix older than
    // what the stored state reflects changes nothing, a newer one runs against the state restored.
    const replayed = late !== undefined && state?.observedThrough === null;
    // Newer than any fix run, but older than what a sweep assumed of the device while it was quiet (it stayed where
    // it was last seen): run here, and checked by the late path, which withdraws what the fixes contradict.
    if (late && state && (replayed || at < state.sweptTo)) {
      late.push(record);
      state.replaying = true;
    }
    if (
      !replayed &&
      state &&
      state.observedThrough === null &&
      (at < state.settledBefore || (at < state.last.timestamp && record.buildingId !== state.buildingId))
    )
      return out;
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
        sweptTo: -Infinity,
        replaying: false,
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
    if (state.buildingId !== null && state.buildingId !== record.buildingId)
      this.leaveBuilding(state, at, replayed ? emptyDetections() : out);
    // Only a replay after a rebuild can be older than `last`: it may still enter or exit, but `last` and the
    // dead-man state stay with the newer stored position.
    const newest = record.timestamp >= state.last.timestamp;
    if (newest && state.deadman && deadman.contactRestored(state.deadman)) this.restoreContact(state, record, out);
    if (!replayed) state.observedThrough = record.timestamp;
    if (newest) {
      state.last = record;
      state.userId = record.userId;
    }
    const detection = this.buildings.of(runtime);
    if (runtime && detection && record.floorId !== null && record.x !== null && record.y !== null) {
      state.buildingId = runtime.id;
      state.floorId = record.floorId;
      if (!replayed) {
        const zoneIds = this.tagged.of(detection.index, record.floorId, record.x, record.y);
        const stepped = transition.step(state.transition, { zoneIds, floorId: record.floorId }, detection.transitionRules, at);
        setTransition(state, stepped.state);
        this.collectTransitions(state, detection, stepped.transitions, out);
        this.checkMaxStay(state, detection, at, out);
      }
      if (newest)
        state.deadman = deadman.step(
          state.deadman,
          { x: record.x, y: record.y, floorId: record.floorId, buildingId: runtime.id },
          detection.deadman,
          now,
        );
    } else {
      state.buildingId = record.buildingId;
      state.floorId = null;
      state.deadman = undefined; // out of the building: neither stillness nor silence means anything
    }
    return out;
  }

  /** What the late path needs of a device held here: the newest fix run (and its event time now), its building. */
  liveOf(
    organizationId: string,
    deviceId: string,
  ): { observedThrough: number | null; last: PositionRecord; buildingId: number | null } | undefined {
    const state = this.devices.get(`${organizationId}|${deviceId}`);
    return state && { observedThrough: state.observedThrough, last: state.last, buildingId: state.buildingId };
  }

  /**
   * The late path re-ran the device's fixes through `observedThrough` in event time (after a rebuild, through its
   * newest stored fix): its zone and stay state replaces the live one, unless a newer fix was run meanwhile (then
   * the next late run sets it right).
   */
  adoptReplay(
    organizationId: string,
    deviceId: string,
    observedThrough: number,
    zones: transition.TransitionState,
    stays: maxStay.MaxStayState,
  ): boolean {
    const state = this.devices.get(`${organizationId}|${deviceId}`);
    if (!state || (state.observedThrough ?? state.last.timestamp) !== observedThrough) return false;
    state.observedThrough = observedThrough;
    state.transition = zones;
    state.maxStay = stays;
    state.transitionChanged = true;
    return true;
  }

  /** The late path is done with these devices (replayed, or given up): sweeps judge their zones and stays again. */
  replayed(keys: Iterable<{ organizationId: string; deviceId: string }>): void {
    for (const { organizationId, deviceId } of keys) {
      const state = this.devices.get(`${organizationId}|${deviceId}`);
      if (state) state.replaying = false;
    }
  }

  /** Per building held here: the newest fix time run (a scrape's read, over every device held). */
  watermarks(): Map<number, number> {
    const newest = new Map<number, number>();
    for (const state of this.devices.values()) {
      if (state.buildingId === null || state.observedThrough === null) continue;
      const held = newest.get(state.buildingId);
      if (held === undefined || state.observedThrough > held) newest.set(state.buildingId, state.observedThrough);
    }
    return newest;
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
    this.resumedAt.delete(buildingId);
    this.storms.delete(buildingId);
  }

  /** A storm read back from its building alarm (a rebuild): its members' silence alarms are held by it again. */
  restoreStorm(organizationId: string, buildingId: number, details: Record<string, unknown>): void {
    const startedAt = typeof details.started_at === 'string' ? Date.parse(details.started_at) : NaN;
    if (!Number.isFinite(startedAt)) return;
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

  /** The storm of a building, if one stands (members by device id). */
  stormOf(buildingId: number): storm.Storm<DetectedAlarm> | undefined {
    return this.storms.get(buildingId)?.storm;
  }

  /** Alarm events (from the bus): a building alarm closed ends its storm, whose members still silent get their DEADMAN at the next sweep. */
  alarmsChanged(changes: readonly AlarmChange[]): void {
    for (const { event } of changes) {
      if (event.type !== 'BUILDING_SILENT' || event.building_id === null || !isFinalAlarmState(event.state)) continue;
      const held = this.storms.get(event.building_id);
      if (held && typeof event.details.started_at === 'string' && Date.parse(event.details.started_at) === held.storm.startedAt)
        held.closed = true;
    }
  }

  /** Detection of these buildings resumes at `at` (rebuilt at start or on a takeover): what was silent before is judged from then. */
  resume(buildingIds: Iterable<number>, at: number): void {
    for (const buildingId of buildingIds) this.resumedAt.set(buildingId, Math.max(at, this.resumedAt.get(buildingId) ?? -Infinity));
  }

  /** Storage is out of reach: positions are refused, so until `resumeAll` no silence or stay runs on. */
  interrupt(): void {
    this.interrupted = true;
  }

  /** Storage is back at `at`: every building resumes then. */
  resumeAll(at: number): void {
    this.interrupted = false;
    this.allResumedAt = Math.max(this.allResumedAt, at);
  }

  /** Since when this building's devices have been watched without a break of ours (`now` while interrupted). */
  watchedSince(buildingId: number | null, now: number): number {
    if (this.interrupted) return now;
    const building = buildingId === null ? undefined : this.resumedAt.get(buildingId);
    return building === undefined ? this.allResumedAt : Math.max(building, this.allResumedAt);
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
      sweptTo: -Infinity,
      replaying: false,
      transition: device.transition,
      transitionChanged: false,
      maxStay: device.maxStay,
      deadman: device.deadman,
    });
    if (this.devices.size > this.maxDevices) this.evictOldest(last.receivedAt);
  }

  private evictOldest(now: number): void {
    const [key, state] = this.devices.entries().next().value!;
    this.leaveBuilding(state, now - state.last.receivedAt + state.last.timestamp, this.evicted);
    this.devices.delete(key);
  }

  /** Timeouts that need no new position: pending debounces, stays running over, dead-man, forgotten devices. */
  sweep(now: number): Detections {
    const out = this.evicted;
    this.evicted = emptyDetections();
    // Per building: its devices as a storm counts them, and the silence alarms due now (raised or held after the loop).
    const tallies = new Map<number, storm.StormTally>();
    const due = new Map<number, Map<string, DetectedAlarm>>();
    for (const [key, state] of this.devices) {
      const runtime = state.buildingId !== null ? this.registry.peek(state.buildingId) : undefined;
      const detection = this.buildings.of(runtime);
      // The device's event time now: its newest fix, carried forward by the time since that fix arrived.
      const offset = state.last.timestamp - state.last.receivedAt;
      const eventNow = now + offset;
      if (now - state.last.receivedAt > this.forgetAfterMs) {
        this.leaveBuilding(state, eventNow, out);
        this.devices.delete(key);
        continue;
      }
      if (!detection) continue;
      const watchedSince = this.watchedSince(state.buildingId, now);
      if (!state.replaying) {
        const swept = transition.sweep(state.transition, detection.transitionRules, eventNow);
        if (swept.transitions.length > 0) {
          setTransition(state, swept.state);
          this.collectTransitions(state, detection, swept.transitions, out);
          state.sweptTo = eventNow;
        }
        const raised = out.alarms.length;
        this.checkMaxStay(state, detection, eventNow, out, { lastSeenAt: state.last.timestamp, watchedSince: watchedSince + offset });
        if (out.alarms.length > raised) state.sweptTo = eventNow;
      }
      if (state.deadman) {
        const silenceS = detection.deadman.deadmanSilenceS;
        const buildingId = state.deadman.buildingId;
        if (silenceS != null && silenceS > 0) {
          const tally = tallies.get(buildingId) ?? tallies.set(buildingId, storm.emptyTally()).get(buildingId)!;
          storm.count(tally, now - Math.max(state.deadman.lastSeenAt, watchedSince), silenceS);
        }
        const result = deadman.sweep(state.deadman, detection.deadman, now, watchedSince);
        state.deadman = result.state;
        if (result.alarm) {
          // A silence waits for the building's tally (a storm holds it); stillness is raised at once.
          const alarm = deadmanAlarm(this.alarmPlace(state), result.alarm.reason, result.alarm.since);
          if (result.alarm.reason === 'silence')
            (due.get(buildingId) ?? due.set(buildingId, new Map()).get(buildingId)!).set(state.deviceId, alarm);
          else out.alarms.push(alarm);
        }
      }
    }
    for (const buildingId of new Set([...due.keys(), ...this.storms.keys()]))
      this.judgeStorm(buildingId, tallies.get(buildingId) ?? storm.emptyTally(), due.get(buildingId) ?? new Map(), now, out);
    return out;
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
    const detection = this.buildings.of(this.registry.peek(buildingId));
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

  /** The device's silence alarm, if still OPEN, learns that it reported again, and where (its place stays where it fell silent); a storm's member leaves the storm. */
  private restoreContact(state: DeviceState, record: PositionRecord, out: Detections): void {
    const held = state.deadman && this.storms.get(state.deadman.buildingId);
    if (held?.storm.members.has(state.deviceId)) {
      // Back from a storm: it leaves it (the building alarm says so at the next sweep); it has no DEADMAN of its own to update.
      held.storm = storm.leave(held.storm, state.deviceId);
      held.changed = true;
      return;
    }
    const hasCartesians = record.x !== null && record.y !== null;
    out.alarms.push({
      ...this.alarmPlace(state),
      type: 'DEADMAN',
      onlyIfOpen: true,
      idempotencyKey: `deadman-contact|${state.deviceId}|${record.receivedAt}`,
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

  private leaveBuilding(state: DeviceState, now: number, out: Detections): void {
    const runtime = state.buildingId !== null ? this.registry.peek(state.buildingId) : undefined;
    const detection = this.buildings.of(runtime);
    const left = transition.step(state.transition, { zoneIds: [], floorId: null }, NO_RULES, now);
    if (detection) this.collectTransitions(state, detection, left.transitions, out);
    setTransition(state, transition.initialTransitionState());
    state.maxStay = maxStay.initialMaxStayState();
    state.deadman = undefined;
  }

  private collectTransitions(
    state: DeviceState,
    detection: BuildingDetection,
    transitions: readonly transition.ZoneTransition[],
    out: Detections,
  ): void {
    for (const change of transitions) {
      const zoneEvent = zoneEventOf(state as ZoneEventSubject, detection, change);
      out.zoneEvents.push(zoneEvent);
      const event = zoneEvent.zoneKind === 'event' ? detection.events.get(change.zoneId) : undefined;
      if (change.type === 'enter' && event) {
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
   * `watch`: from a sweep, what the stays may be assumed to have lasted from (none from a position: it is a fix).
   */
  private checkMaxStay(state: DeviceState, detection: BuildingDetection, now: number, out: Detections, watch?: maxStay.Watch): void {
    if (detection.maxStayRules.size === 0) return;
    let result: maxStay.MaxStayResult;
    if (!state.transitionChanged) result = maxStay.sweep(state.maxStay, detection.maxStayRules, now, watch);
    else {
      const inside = transition.confirmedInside(state.transition);
      for (const zoneId of [...inside.keys()]) if (zoneKindOf(zoneId) !== 'geofence') inside.delete(zoneId);
      result = maxStay.step(
        staysOf(state.maxStay, inside),
        { insideZoneIds: inside.keys(), enteredAt: inside, now, watch },
        detection.maxStayRules,
      );
      state.transitionChanged = false;
    }
    state.maxStay = result.state;
    for (const alarm of result.alarms) out.alarms.push(maxStayAlarmOf(this.alarmPlace(state), detection, alarm, now));
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
