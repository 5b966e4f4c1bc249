import type { PositionRecord } from '../../shared/positions/position-record.js';
import type { BuildingRegistry, BuildingRuntime } from '../realtime/building-registry.js';
import { BuildingDetections } from './building-detection.js';
import type { AlarmChange, DetectedDevice, Detector, DetectorStates, Fix, StoredBuilding, StoredDevice, Sweep } from './detector.js';
import { createDetectors } from './detectors/index.js';
import { emptyDetections, type Detections } from './detections.js';

/** Small per-device state: what each detector remembers (`states`), plus who owns the device's sweeps. */
interface DeviceState extends DetectedDevice {
  userId: string | null;
  buildingId: number | null;
  floorId: number | null;
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
   * The device's event time at the last sweep that settled something for it in event time (a debounce, a
   * max-stay) on its clock carried forward: a fix taken before it, even newer than any run, may contradict what the
   * sweep assumed.
   */
  sweptTo: number;
  /**
   * Its fixes wait for the late path, which reads what is stored and then hands back the state: a sweep meanwhile
   * would judge zones and stays the replay is about to replace, and what it stored then would escape the replay.
   */
  replaying: boolean;
  /**
   * Late fixes of it wait in the late queue (late-queue.ts), replayed beside the on-time series: until the replay
   * hands back its state, every fix of it goes there too, in order (its place and dead-man are followed here).
   */
  queued: boolean;
  states: DetectorStates;
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
 *
 * The detectors are those of one list (detectors/index.ts), all of one shape (detector.ts): the engine keeps their
 * state per device and runs each of them at each fix, sweep, departure and rebuild, knowing none of them by name.
 */
export class DetectionEngine {
  /** In least-recently-seen order (a device moves to the end at each position), so the first one is evicted. */
  private readonly devices = new Map<string, DeviceState>();
  /** Exits settled by evicting devices over the cap, emitted by the next sweep (an eviction has no caller to tell). */
  private evicted = emptyDetections();
  /**
   * When detection of each building last resumed here (its rebuild at start or takeover), and of every building
   * (storage back after an outage): silence and stays are not counted across our own absence before it.
   */
  private readonly resumedAt = new Map<number, number>();
  private allResumedAt = -Infinity;
  /** Storage is out of reach: no position can be taken, so nobody is watching (see `interrupt`). */
  private interrupted = false;
  /** Each building's zones and rules, as the detectors read them, and what each zone key names. */
  readonly buildings = new BuildingDetections();
  /** What the detectors are handed for a fix and at a sweep: filled afresh each time, so nothing is allocated for it. */
  private readonly fix = {} as Fix;
  private readonly sweeping = {} as Sweep;
  private readonly detectors: readonly Detector[];

  constructor(
    private readonly registry: BuildingRegistry,
    /** A silent device's state is settled (exits emitted) and dropped after this long: what a rebuild looks back over. */
    readonly forgetAfterMs: number,
    /** Devices kept at most; past it the least recently seen one is settled and forgotten, as a silent one would be. */
    private readonly maxDevices = 200_000,
    /** The detectors run (the list of detectors/index.ts; a test may give its own). */
    detectors = createDetectors,
  ) {
    // A detector reading another's state learns where it is once the list is made.
    const readers: { name: string; at(index: number): void }[] = [];
    this.detectors = detectors({
      buildings: this.buildings,
      detectionOf: (buildingId) => this.buildings.of(this.registry.peek(buildingId)),
      stateOf: <S>(name: string) => {
        let index = -1;
        readers.push({ name, at: (found) => (index = found) });
        return (device: DetectedDevice) => device.states[index] as S;
      },
    });
    for (const reader of readers) {
      const index = this.detectors.findIndex((detector) => detector.name === reader.name);
      if (index < 0) throw new Error(`a detector reads the state of ${reader.name}, which is not in the list`);
      reader.at(index);
    }
  }

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
    const queued = late !== undefined && state?.queued === true;
    // Newer than any fix run, but older than what a sweep assumed of the device while it was quiet (it stayed where
    // it was last seen): run here, and checked by the late path, which withdraws what the fixes contradict.
    if (late && state && (replayed || queued || at < state.sweptTo)) {
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
        queued: false,
        states: this.initialStates(),
      };
      this.devices.set(key, state);
      if (this.devices.size > this.maxDevices) this.evictOldest(now);
    } else {
      this.devices.delete(key);
      this.devices.set(key, state);
    }
    // Leaving a building (or its floors' coverage) settles what the detectors held there.
    if (state.buildingId !== null && state.buildingId !== record.buildingId)
      this.leaveBuilding(state, at, replayed || queued ? emptyDetections() : out);
    // Only a replay after a rebuild can be older than `last`: it may still enter or exit, but `last` and the
    // dead-man state stay with the newer stored position.
    const newest = record.timestamp >= state.last.timestamp;
    const fix = this.fix;
    fix.previous = state.last;
    fix.previousUserId = state.userId;
    if (!replayed) state.observedThrough = record.timestamp;
    if (newest) {
      state.last = record;
      state.userId = record.userId;
    }
    const detection = this.buildings.of(runtime);
    if (runtime && detection && record.floorId !== null && record.x !== null && record.y !== null) {
      state.buildingId = runtime.id;
      state.floorId = record.floorId;
      fix.detection = detection;
      fix.buildingId = runtime.id;
      fix.floorId = record.floorId;
      fix.x = record.x;
      fix.y = record.y;
    } else {
      state.buildingId = record.buildingId;
      state.floorId = null;
      fix.detection = undefined;
    }
    fix.device = state;
    fix.record = record;
    fix.newest = newest;
    const { states } = state;
    const { detectors } = this;
    for (let index = 0; index < detectors.length; index++) {
      const detector = detectors[index]!;
      // After a rebuild, and while its late fixes wait in the late queue, zones and stays of the device's fixes
      // are the late path's (see above).
      if ((replayed || queued) && detector.clock === 'event') continue;
      states[index] = detector.observe(states[index], fix, out);
    }
    return out;
  }

  /**
   * What the late path needs of a device held here: the newest fix run (and its event time now), its building,
   * whether its fixes wait in the late queue.
   */
  liveOf(
    organizationId: string,
    deviceId: string,
  ): { observedThrough: number | null; last: PositionRecord; buildingId: number | null; queued: boolean } | undefined {
    const state = this.devices.get(`${organizationId}|${deviceId}`);
    return state && { observedThrough: state.observedThrough, last: state.last, buildingId: state.buildingId, queued: state.queued };
  }

  /**
   * The late path re-ran the device's fixes through `observedThrough` in event time (after a rebuild, through its
   * newest stored fix): the states it replayed (those of the event-time detectors, by name) replace the live ones,
   * unless a newer fix was run meanwhile (then the next late run sets it right).
   */
  adoptReplay(organizationId: string, deviceId: string, observedThrough: number, replayed: Readonly<Record<string, unknown>>): boolean {
    const state = this.devices.get(`${organizationId}|${deviceId}`);
    if (!state || (state.observedThrough ?? state.last.timestamp) !== observedThrough) return false;
    state.observedThrough = observedThrough;
    for (const [index, detector] of this.detectors.entries())
      if (Object.hasOwn(replayed, detector.name)) state.states[index] = replayed[detector.name];
    return true;
  }

  /** The late path is done with these devices (replayed, or given up): sweeps judge their zones and stays again. */
  replayed(keys: Iterable<{ organizationId: string; deviceId: string }>): void {
    for (const { organizationId, deviceId } of keys) {
      const state = this.devices.get(`${organizationId}|${deviceId}`);
      if (state && !state.queued) state.replaying = false;
    }
  }

  /** These devices' late fixes wait in the late queue: their next fixes go there too, until `release`. */
  queue(keys: Iterable<{ organizationId: string; deviceId: string }>): void {
    for (const { organizationId, deviceId } of keys) {
      const state = this.devices.get(`${organizationId}|${deviceId}`);
      if (state) {
        state.queued = true;
        state.replaying = true;
      }
    }
  }

  /**
   * The late queue replayed the device through `observedThrough`: unless a newer fix came meanwhile (queued too,
   * for the next replay), its fixes run here again.
   */
  release(organizationId: string, deviceId: string, observedThrough: number): void {
    const state = this.devices.get(`${organizationId}|${deviceId}`);
    if (!state || (state.observedThrough ?? state.last.timestamp) !== observedThrough) return;
    state.queued = false;
    state.replaying = false;
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
    for (const detector of this.detectors) detector.forgetBuilding?.(buildingId);
  }

  /** What the detectors hold per building, read back from storage at a rebuild (a silence storm's alarm). */
  restoreBuilding(organizationId: string, buildingId: number, stored: StoredBuilding): void {
    for (const detector of this.detectors) detector.restoreBuilding?.(organizationId, buildingId, stored);
  }

  /** Alarm events (from the bus), for the detectors that follow them (a building alarm closed ends its storm). */
  alarmsChanged(changes: readonly AlarmChange[]): void {
    for (const detector of this.detectors) detector.alarmsChanged?.(changes);
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
  restore(device: StoredDevice): void {
    const { last } = device;
    const key = `${last.organizationId}|${last.deviceId}`;
    const held = this.devices.get(key);
    if (held && held.last.timestamp > last.timestamp) return;
    this.devices.delete(key);
    const state: DeviceState = {
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
      queued: false,
      states: [],
    };
    for (const [index, detector] of this.detectors.entries()) state.states[index] = detector.restore(device, state);
    this.devices.set(key, state);
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
    const sweep = this.sweeping;
    const { detectors } = this;
    sweep.now = now;
    for (const [key, state] of this.devices) {
      const runtime = state.buildingId !== null ? this.registry.peek(state.buildingId) : undefined;
      const detection = this.buildings.of(runtime);
      // The device's event time now: its newest fix, carried forward by the time since that fix arrived.
      const eventNow = now + state.last.timestamp - state.last.receivedAt;
      if (now - state.last.receivedAt > this.forgetAfterMs) {
        this.leaveBuilding(state, eventNow, out);
        this.devices.delete(key);
        continue;
      }
      if (!detection) continue;
      sweep.device = state;
      sweep.detection = detection;
      sweep.eventNow = eventNow;
      sweep.watchedSince = this.watchedSince(state.buildingId, now);
      const { states } = state;
      for (let index = 0; index < detectors.length; index++) {
        const detector = detectors[index]!;
        if (detector.clock === 'arrival') {
          states[index] = detector.sweep(states[index], sweep, out);
          continue;
        }
        if (state.replaying) continue;
        const found = out.zoneEvents.length + out.alarms.length;
        states[index] = detector.sweep(states[index], sweep, out);
        if (out.zoneEvents.length + out.alarms.length > found) state.sweptTo = eventNow;
      }
    }
    for (const detector of this.detectors) detector.swept?.(now, out);
    return out;
  }

  /** Each detector settles what leaving the building settles (exits), then starts the device over. */
  private leaveBuilding(state: DeviceState, at: number, out: Detections): void {
    const runtime = state.buildingId !== null ? this.registry.peek(state.buildingId) : undefined;
    const leave = { device: state, detection: this.buildings.of(runtime), at };
    for (const [index, detector] of this.detectors.entries()) detector.leave?.(state.states[index], leave, out);
    state.states = this.initialStates();
  }

  private initialStates(): DetectorStates {
    return this.detectors.map((detector) => detector.initial());
  }
}
