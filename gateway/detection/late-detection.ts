import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../../shared/logger.js';
import * as maxStay from '../../shared/detection/max-stay.detector.js';
import * as transition from '../../shared/detection/transition.detector.js';
import type { ZoneKind } from '../../shared/detection/zone-index.js';
import { StorageUnavailableError, isOutageError } from '../../shared/errors.js';
import { detectionCorrections, detectionLateFixes } from '../../shared/metrics/metrics.js';
import type { PositionRecord } from '../../shared/positions/position-record.js';
import { pgArray } from '../../shared/storage/pg-array.js';
import type { Storage } from '../../shared/storage/index.js';
import type { BuildingRegistry, BuildingRuntime } from '../realtime/building-registry.js';
import type { FoldedRaise } from '../alarms/alarm-service.js';
import type { BuildingDetection } from './building-detection.js';
import type { DetectionEngine } from './detection-engine.js';
import { STAYS, fencesInside, maxStayAlarmOf, replayedStays, staysOf } from './detectors/stays.js';
import { ZONES, zoneEventOf } from './detectors/zones.js';
import type { DetectionOutbox } from './detection-outbox.js';
import type { DetectedAlarm, Detections, ZoneEventRecord } from './detections.js';
import { insertZoneEvents } from '../../shared/detection/zone-event-insert.js';
import type { Execute } from '../../shared/webhooks/deliveries.js';
import type { DetectionWebhooks } from './detection-sink.js';
import type { StoredPlaceRow } from '../../shared/positions/position-record.js';
import { epochMs } from '../../shared/storage/epoch-ms.js';
import { unchangedDevices } from './late-screen.js';

export interface LateDetectionDependencies {
  storage: Storage;
  engine: DetectionEngine;
  registry: BuildingRegistry;
  /** Drained before stored events are read (they must include what the live path just found); takes the alarms. */
  outbox: DetectionOutbox;
  /**
   * Withdraws a max-stay alarm the late fixes contradict: marked `superseded`, closed by the system, and its raise
   * key freed so the stay can alarm again should later fixes show it ran over after all.
   */
  supersedeAlarm(organizationId: string, alarmId: string, idempotencyKeys: readonly string[]): Promise<void>;
  /** The keyed raises folded into each of these alarms, oldest first (AlarmService.raisesOf). */
  raisesOf(organizationId: string, alarmIds: readonly string[]): Promise<ReadonlyMap<string, readonly FoldedRaise[]>>;
  /**
   * Takes the raises the late fixes contradict out of the OPEN alarm they folded into, which stands for the rest and
   * shows `shown`, the details of the latest of them (AlarmService.unfold).
   */
  unfoldAlarm(organizationId: string, alarmId: string, idempotencyKeys: readonly string[], shown: Record<string, unknown>): Promise<void>;
  /** Stores the corrections with the webhook deliveries they owe (on this node only, as for on-time events). */
  webhooks?: Pick<DetectionWebhooks, 'storeLateZoneEvents'>;
  /** Pushes stored zone events to every gateway (detection-sink.ts). */
  announce(detections: Pick<Detections, 'zoneEvents' | 'triggered'>): Promise<void>;
  logger: Logger;
  /** DETECTION_REORDER_WINDOW_SECONDS in ms: events learned later than this after they happened are flagged late. */
  reorderWindowMs: number;
  /** How far back stored enters are looked for (as the state loader does). */
  lookbackMs?: number;
  /** Fixes one replay reads at most; a longer stretch is left as the live path saw it (logged). */
  maxReplayFixes?: number;
}

interface FixRow extends StoredPlaceRow {
  user_id: string | null;
  ts_ms: number;
}

interface StayAlarmRow {
  id: string;
  geofence_id: string;
  details: Record<string, unknown> | string;
}

/** One raise of a max-stay alarm: the stay it was about, when it was found, under which key, with which details. */
interface StayRaise {
  /** `zone|enteredAt`: the stay it is about. */
  stay: string;
  enteredAt: number;
  /** The event time it was found at (-Infinity for alarms raised before event time was recorded). */
  occurredAt: number;
  key: string;
  details: Record<string, unknown>;
}

/**
 * A stored max-stay alarm of the device, as the late path weighs it: the raises folded into it (alarms of one
 * device, kind and fence fold while OPEN, showing the last), or, for one raised before raises were recorded
 * (m0035), the one it shows.
 */
interface StayAlarm {
  id: string;
  raises: StayRaise[];
  superseded: boolean;
}

function stayRaiseOf(zoneId: string, deviceId: string, details: Record<string, unknown>, key?: string): StayRaise | undefined {
  const enteredAt = Date.parse(String(details.entered_at));
  if (!Number.isFinite(enteredAt)) return undefined;
  const occurredAt = typeof details.occurred_at === 'string' ? Date.parse(details.occurred_at) : Number.NaN;
  return {
    stay: `${zoneId}|${enteredAt}`,
    enteredAt,
    occurredAt: Number.isFinite(occurredAt) ? occurredAt : -Infinity,
    key: key ?? `max-stay|${deviceId}|${zoneId}|${enteredAt}`,
    details,
  };
}

function stayAlarmOf(row: StayAlarmRow, deviceId: string, recorded: readonly FoldedRaise[] | undefined): StayAlarm | undefined {
  const details = typeof row.details === 'string' ? (JSON.parse(row.details) as Record<string, unknown>) : row.details;
  const raises = recorded?.length
    ? recorded.map((raise) => stayRaiseOf(row.geofence_id, deviceId, raise.details, raise.key))
    : [stayRaiseOf(row.geofence_id, deviceId, details)];
  if (raises.some((raise) => raise === undefined)) return undefined;
  return { id: row.id, raises: raises as StayRaise[], superseded: details.superseded === true };
}

interface EventRow {
  id: string;
  building_id: number;
  zone_kind: string;
  zone_id: string;
  type: 'enter' | 'exit';
  at_ms: number;
}

const NO_RULES: transition.TransitionRules = new Map();
/** An event's identity for "was it already produced": what it is, where, and its time. */
const keyOf = (type: string, zoneKind: string, zoneId: string, at: number) => `${type}|${zoneKind}|${zoneId}|${at}`;

/**
 * How far a device was replayed: through its newest fix run (`through`), from `from`, with the fixes stored before
 * `readAt` (performance.now()) read; a fix stored before then with a time in [from, through] was replayed. No
 * replay (given up, failed): `from` is Infinity.
 */
export interface ReplayedDevice {
  from: number;
  through: number;
  readAt: number;
}

/** What re-running a device's fixes in event time found. */
interface Replay {
  events: ZoneEventRecord[];
  alarms: DetectedAlarm[];
  zones: transition.TransitionState;
  stays: maxStay.MaxStayState;
}

/**
 * The late path (issue 30, docs/event-time.md): fixes older than their device's newest one run by the live path.
 * A read's late fixes are screened first (`screen`, late-screen.ts); those that may change something are replayed
 * by the late queue (late-queue.ts), beside the on-time series, with the newer fixes of their devices that came
 * meanwhile.
 *
 * Per device, from its oldest late fix: the state just before it is rebuilt from storage (the zones whose latest
 * stored event there is an enter, with the building of the fix before it; stays alarmed by their stored raise key),
 * then every stored fix from there to the newest one the live path ran is run again, in fix-time order, through
 * the same pure detectors. What this finds is compared with the stored events of that stretch:
 * - the same event (type, zone, time) already stored is not produced twice;
 * - a missing one is stored and pushed, flagged `late` with its delay when learned past the reorder window;
 * - a stored one the fixes now contradict is kept, marked `superseded`, and the new event of the same type and
 *   zone nearest in time names it (`supersedes`).
 * Max-stay alarms found are raised through the outbox under the stay's key, so one already raised is a no-op, and
 * the device's live zone and stay state becomes the replay's. A dwell or grace under way just before the late run
 * is restored as the stored event it went on to fire (see `before`), so debounced fences give the on-time events.
 */
export class LateDetection {
  constructor(private readonly deps: LateDetectionDependencies) {}

  /**
   * The late fixes that may change something: those of devices whose late fixes all change nothing, as their
   * stored neighbours tell (late-screen.ts), are counted and left out; they need no replay. One query, no wait for
   * storage: the on-time series asks it of each read's late fixes, and queues the rest (late-queue.ts).
   */
  async screen(records: readonly PositionRecord[]): Promise<PositionRecord[]> {
    const byDevice = byDeviceOf(records);
    const { engine } = this.deps;
    const unchanged = await unchangedDevices(
      { storage: this.deps.storage, detectionOf: (organizationId, buildingId) => this.detectionOf(organizationId, buildingId) },
      new Map([...byDevice].filter(([, fixes]) => this.strictlyLate(fixes))),
    );
    const rest: PositionRecord[] = [];
    for (const [key, fixes] of byDevice) {
      if (!unchanged.has(key)) rest.push(...fixes);
      else this.countLate(fixes, engine.liveOf(fixes[0]!.organizationId, fixes[0]!.deviceId)!.observedThrough!);
    }
    engine.replayed([...byDevice].filter(([key]) => unchanged.has(key)).map(([, fixes]) => fixes[0]!));
    return rest;
  }

  /**
   * Re-detects the devices of these late fixes; resolves to how far each device was replayed (by
   * `organizationId|deviceId`), or false once `holds()` turned false; rejects on an outage only. `rest`, if given,
   * is awaited after each device's replay with the time it took (the late queue's pacing on embedded storage).
   */
  async run(
    records: readonly PositionRecord[],
    holds: () => boolean,
    rest?: (took: number) => Promise<void>,
  ): Promise<Map<string, ReplayedDevice> | false> {
    const { outbox, logger } = this.deps;
    const byDevice = byDeviceOf(records);
    const through = new Map<string, ReplayedDevice>();
    try {
      // Their organizations' detections stored first (the state rebuilt from storage must hold them); what the
      // on-time series detects meanwhile is not waited for.
      const organizations = new Set(records.map((record) => record.organizationId));
      if (!(await outbox.storedThrough(organizations)))
        throw new StorageUnavailableError('detections wait for storage: late fixes are taken again later');
      for (const [key, fixes] of byDevice) {
        if (!holds()) return false;
        const started = performance.now();
        try {
          const replayed = await this.device(fixes, holds);
          if (replayed !== undefined) through.set(key, replayed);
        } catch (error) {
          if (isOutageError(error)) throw error;
          logger.error({ err: error, deviceId: fixes[0]!.deviceId }, 'late detection of a device failed; its live state is kept');
          const live = this.deps.engine.liveOf(fixes[0]!.organizationId, fixes[0]!.deviceId);
          if (live) through.set(key, { from: Infinity, through: live.observedThrough ?? live.last.timestamp, readAt: -Infinity });
        }
        if (rest) await rest(performance.now() - started);
      }
      return holds() && through;
    } finally {
      // Taken again after an outage, they wait no more meanwhile: a sweep then judges them as before.
      this.deps.engine.replayed([...byDevice.values()].map((fixes) => fixes[0]!));
    }
  }

  /** Replays one device's late fixes; resolves to how far (undefined: none held here). */
  private async device(fixes: PositionRecord[], holds: () => boolean): Promise<ReplayedDevice | undefined> {
    const { engine, storage } = this.deps;
    const { organizationId, deviceId } = fixes[0]!;
    const live = engine.liveOf(organizationId, deviceId);
    if (!live) return;
    // After a rebuild nothing has run here yet: the state restored reflects the device's newest stored fix.
    const through = live.observedThrough ?? live.last.timestamp;
    let from = Infinity;
    let arrivedAt = -Infinity;
    for (const fix of fixes) {
      from = Math.min(from, fix.timestamp);
      arrivedAt = Math.max(arrivedAt, fix.receivedAt);
    }
    this.countLate(fixes, through);
    const lookbackMs = this.deps.lookbackMs ?? 24 * 3600_000;
    const fixBefore = async (at: number) =>
      (
        await storage.execute<FixRow>(
          `select user_id, building_id, floor_id, x, y, lat, lng, ${epochMs('ts')} as ts_ms from positions
           where organization_id = ? and device_id = ? and ts < to_timestamp(?::float8 / 1000) and ts >= to_timestamp(?::float8 / 1000)
           order by ts desc, received_at desc limit 1`,
          [organizationId, deviceId, at, at - lookbackMs],
        )
      )[0];
    // Max-stay alarms of the device, by the raises folded into each: those found before the late run stand (their
    // stays count as alarmed); those found in it (or by a sweep since) are what the replay must find again.
    const stayRows = await storage.execute<StayAlarmRow>(
      `select id, geofence_id, details from alarms
       where organization_id = ? and device_id = ? and type = 'GEOFENCE_MAX_STAY_TIME' and created_at >= to_timestamp(?::float8 / 1000)`,
      [organizationId, deviceId, from - lookbackMs],
    );
    const recorded = await this.deps.raisesOf(
      organizationId,
      stayRows.map((row) => row.id),
    );
    const stayAlarms = stayRows
      .map((row) => stayAlarmOf(row, deviceId, recorded.get(row.id)))
      .filter((alarm): alarm is StayAlarm => alarm !== undefined && !alarm.superseded);
    const stayRaises = stayAlarms.flatMap((alarm) => alarm.raises);
    // A raise the replay must find again (found in the late run or after it) about a stay entered before the run:
    // the replay starts at that stay's enter, so it sees every fix the stay could have gone over at. The live path
    // records a raise when it finds it, which may be later than the fixes, late or not, show the stay went over (a
    // stay that went over during an exit grace, found at a fix after the grace): a replay starting between the two
    // would not find it again, and would withdraw a correct alarm (issue 30, seed 3030 path 18 of the property).
    // Each step back (for a stay, for a debounce) is checked against the raises again.
    const earliest = from - lookbackMs;
    const stayBefore = (raise: StayRaise) => raise.occurredAt >= from && raise.enteredAt < from && raise.enteredAt >= earliest;
    let previous: FixRow | undefined;
    do {
      for (const raise of stayRaises) if (stayBefore(raise)) from = raise.enteredAt;
      previous = await fixBefore(from);
      // A dwell or grace under way at the fix before the run started after that fix's time less the longest one: the
      // replay starts there, so one the detectors held only in memory (an owner that died with it) is found again.
      const debounceMs = this.longestDebounce(await this.detectionOf(organizationId, previous?.building_id ?? null));
      if (previous && debounceMs > 0 && previous.ts_ms - debounceMs < from) {
        from = previous.ts_ms - debounceMs;
        previous = await fixBefore(from);
      }
    } while (stayRaises.some(stayBefore));
    const maxFixes = this.deps.maxReplayFixes ?? 200_000;
    // Every fix handed to detection before now is stored (positions are stored before they are handed off).
    const readAt = performance.now();
    const replayed = await storage.execute<FixRow>(
      `select user_id, building_id, floor_id, x, y, lat, lng, ${epochMs('ts')} as ts_ms from positions
       where organization_id = ? and device_id = ? and ts >= to_timestamp(?::float8 / 1000) and ts <= to_timestamp(?::float8 / 1000)
       order by ts, received_at limit ?`,
      [organizationId, deviceId, from, through, maxFixes + 1],
    );
    if (replayed.length > maxFixes) {
      this.deps.logger.warn({ deviceId, from, through }, 'late run too long to replay; the live events stand');
      return { from: Infinity, through, readAt };
    }
    // The zones as the detectors held them just before the late run, from each one's latest event before it: an
    // enter is inside since its `at`; one decided (after its dwell or grace) only during the run was still under
    // way, pending since its `at`, from the side before it. A debounce under way then that never fired needs
    // nothing: a fix contradicted it in time, and that fix is replayed too. One decided earlier than its stored
    // `fired_at` says (a replay found it again with fixes the live path lacked) is settled by the first fix replayed,
    // its dwell or grace having elapsed before it.
    const before = await storage.execute<EventRow & { fired_ms: number }>(
      `select id::text as id, building_id, zone_kind, zone_id, type, ${epochMs('at')} as at_ms, ${epochMs('fired_at')} as fired_ms
       from zone_events
       where organization_id = ? and device_id = ? and not superseded
         and at < to_timestamp(?::float8 / 1000) and at >= to_timestamp(?::float8 / 1000)
       order by at, fired_at, id`,
      [organizationId, deviceId, from, from - lookbackMs],
    );
    const inside = new Map<string, number>();
    const fences = new Map<string, number>();
    /** By zone: the stored event under way at the late run, which the replay must find again or supersede. */
    const pending = new Map<string, EventRow>();
    for (const row of before) {
      const zoneId = engine.buildings.keyOf(row.zone_kind as ZoneKind, row.zone_id);
      // Rows in time order: each zone ends at its latest event. One decided during the run but followed by another
      // before it happened all the same: its side is the zone's before the later one (an enter whose dwell a late
      // replay found, then an exit: the exit's grace is under way from inside, seed 3030 path 35 of the property).
      const earlier = pending.get(zoneId);
      pending.delete(zoneId);
      if (earlier?.type === 'enter') inside.set(zoneId, earlier.at_ms);
      else if (earlier) inside.delete(zoneId);
      if (!previous || Number(row.building_id) !== previous.building_id) inside.delete(zoneId);
      else if (row.fired_ms >= from) pending.set(zoneId, row);
      else if (row.type === 'enter') inside.set(zoneId, row.at_ms);
      else inside.delete(zoneId);
    }
    for (const [zoneId, at] of inside) if (engine.buildings.zoneOf(zoneId).kind === 'geofence') fences.set(zoneId, at);
    const alarmedBefore = new Set(stayRaises.filter((raise) => raise.occurredAt < from).map((raise) => raise.stay));
    const alarmed = new Set([...fences].filter(([zoneId, at]) => alarmedBefore.has(`${zoneId}|${at}`)).map(([zoneId]) => zoneId));

    const replay = await this.replay(
      { organizationId, deviceId, previous, arrivedAt },
      transition.restoredState(inside, previous?.floor_id ?? null, new Map([...pending].map(([zoneId, row]) => [zoneId, row.at_ms]))),
      maxStay.restoredState(fences, alarmed),
      replayed,
      // The device's event time now, as the live sweep judges it: pending debounces it has settled settle here too.
      Date.now() - live.last.receivedAt + live.last.timestamp,
    );
    // The stretch's stored events: those that happened in it, and the debounces under way at its start.
    const stored = await storage.execute<EventRow>(
      `select id::text as id, building_id, zone_kind, zone_id, type, ${epochMs('at')} as at_ms from zone_events
       where organization_id = ? and device_id = ? and not superseded and at >= to_timestamp(?::float8 / 1000)
       order by at, id`,
      [organizationId, deviceId, from],
    );
    const { added, superseded } = reconcile(replay.events, [...pending.values(), ...stored]);
    const found = new Set(replay.alarms.map((alarm) => `${alarm.geofenceId}|${Date.parse(String(alarm.details!.entered_at))}`));
    const standing = new Set(stayRaises.map((raise) => raise.stay));
    const raise = replay.alarms.filter((alarm) => !standing.has(`${alarm.geofenceId}|${Date.parse(String(alarm.details!.entered_at))}`));
    if (!holds()) return undefined;
    // A raise the late fixes contradict is withdrawn: with its alarm when it is all the alarm stands for, otherwise
    // taken out of it, the alarm showing the latest raise left (a correct stay's alarm that a wrong one folded into
    // stands, seed 9 of test/cluster/event-time-failover.test.ts).
    let contradicted = 0;
    for (const alarm of stayAlarms) {
      const wrong = alarm.raises.filter((raise) => raise.occurredAt >= from && !found.has(raise.stay));
      if (wrong.length === 0) continue;
      contradicted += wrong.length;
      const keys = wrong.map((raise) => raise.key);
      const left = alarm.raises.filter((raise) => !wrong.includes(raise));
      if (left.length === 0) await this.deps.supersedeAlarm(organizationId, alarm.id, keys);
      else {
        const shown = left.reduce((latest, raise) => (raise.occurredAt >= latest.occurredAt ? raise : latest));
        await this.deps.unfoldAlarm(organizationId, alarm.id, keys, shown.details);
      }
    }
    if (added.length > 0 || superseded.length > 0) await this.store(added, superseded);
    const corrections = superseded.length + contradicted;
    if (corrections > 0) detectionCorrections.labels(String(fixes[0]!.buildingId ?? '')).inc(corrections);
    if (added.length > 0) await this.deps.announce({ zoneEvents: added, triggered: [] });
    if (raise.length > 0) this.deps.outbox.add({ zoneEvents: [], alarms: raise, triggered: [] }, false);
    engine.adoptReplay(organizationId, deviceId, through, { [ZONES]: replay.zones, [STAYS]: replayedStays(replay.stays) });
    return { from, through, readAt };
  }

  /**
   * Fixes all older than the newest one their device ran here: their neighbours in storage can tell whether they
   * change anything. Not so after a rebuild (nothing ran here yet), for a fix newer than any run that a sweep
   * overtook (what the sweep assumed is the replay's to check), nor while a replay of the device is pending.
   */
  private strictlyLate(fixes: readonly PositionRecord[]): boolean {
    const live = this.deps.engine.liveOf(fixes[0]!.organizationId, fixes[0]!.deviceId);
    const through = live?.observedThrough;
    return through != null && !live!.queued && fixes.every((fix) => fix.timestamp < through);
  }

  /** Fixes older than `through` by more than the reorder window are late (metrics). */
  private countLate(fixes: readonly PositionRecord[], through: number): void {
    for (const fix of fixes)
      if (through - fix.timestamp > this.deps.reorderWindowMs && fix.buildingId !== null)
        detectionLateFixes.labels(String(fix.buildingId)).inc();
  }

  /** The device's stored fixes run again in fix-time order, from the state before them, as the live path runs them. */
  private async replay(
    device: { organizationId: string; deviceId: string; previous: FixRow | undefined; arrivedAt: number },
    startZones: transition.TransitionState,
    startStays: maxStay.MaxStayState,
    fixes: readonly FixRow[],
    eventNow: number,
  ): Promise<Replay> {
    const { reorderWindowMs } = this.deps;
    const { organizationId, deviceId, arrivedAt } = device;
    let zones = startZones;
    let stays = startStays;
    let buildingId = device.previous?.building_id ?? null;
    let floorId = device.previous?.floor_id ?? null;
    let userId = device.previous?.user_id ?? null;
    let detection = await this.detectionOf(organizationId, buildingId);
    const events: ZoneEventRecord[] = [];
    const alarms: DetectedAlarm[] = [];
    const flag = (event: ZoneEventRecord): ZoneEventRecord => {
      const delayMs = arrivedAt - event.at;
      return delayMs > reorderWindowMs ? { ...event, late: true, delayMs } : event;
    };
    const emit = (changes: readonly transition.ZoneTransition[]) => {
      if (!detection || buildingId === null) return;
      for (const change of changes)
        events.push(
          flag(
            zoneEventOf(
              { organizationId, buildingId, floorId, deviceId, userId },
              detection,
              this.deps.engine.buildings.zoneOf(change.zoneId),
              change,
            ),
          ),
        );
    };
    for (const fix of fixes) {
      if (buildingId !== null && buildingId !== fix.building_id) {
        // Leaving a building closes every stay there at once, as the live path does.
        emit(transition.step(zones, { zoneIds: [], floorId: null }, NO_RULES, fix.ts_ms).transitions);
        zones = transition.initialTransitionState();
        stays = maxStay.initialMaxStayState();
      }
      if (fix.building_id !== buildingId) detection = await this.detectionOf(organizationId, fix.building_id);
      buildingId = fix.building_id;
      floorId = fix.floor_id;
      userId = fix.user_id ?? userId;
      if (!detection || fix.floor_id === null || fix.x === null || fix.y === null) continue;
      const zoneIds = new Set(detection.index.zonesAt(fix.floor_id, fix.x, fix.y).map((zone) => zone.id));
      const stepped = transition.step(zones, { zoneIds, floorId: fix.floor_id }, detection.transitionRules, fix.ts_ms);
      zones = stepped.state;
      emit(stepped.transitions);
      if (detection.maxStayRules.size === 0) continue;
      const inside = fencesInside(zones, this.deps.engine.buildings);
      const result = maxStay.step(
        staysOf(stays, inside),
        { insideZoneIds: inside.keys(), enteredAt: inside, now: fix.ts_ms },
        detection.maxStayRules,
      );
      stays = result.state;
      const place = { organizationId, deviceId, userId, buildingId, floorId, x: fix.x, y: fix.y, lat: fix.lat, lng: fix.lng };
      for (const alarm of result.alarms) {
        const delayMs = arrivedAt - fix.ts_ms;
        alarms.push(maxStayAlarmOf(place, detection, alarm, fix.ts_ms, delayMs > reorderWindowMs ? { delayMs } : undefined));
      }
    }
    // What the live sweep has settled by now (the device's event time) settles here the same way: debounces, and
    // stays that ran over since the newest fix.
    if (detection) {
      const swept = transition.sweep(zones, detection.transitionRules, eventNow);
      zones = swept.state;
      emit(swept.transitions);
      if (detection.maxStayRules.size > 0 && buildingId !== null) {
        const result = maxStay.sweep(stays, detection.maxStayRules, eventNow);
        stays = result.state;
        const last = fixes.at(-1) ?? device.previous;
        const place = {
          organizationId,
          deviceId,
          userId,
          buildingId,
          floorId,
          x: last?.x ?? null,
          y: last?.y ?? null,
          lat: last?.lat,
          lng: last?.lng,
        };
        for (const alarm of result.alarms) alarms.push(maxStayAlarmOf(place, detection, alarm, eventNow));
      }
    }
    return { events, alarms, zones, stays };
  }

  /** The longest dwell or exit grace of a building's zones, in ms (0 without any). */
  private longestDebounce(detection: BuildingDetection | undefined): number {
    let longest = 0;
    for (const rule of detection?.transitionRules.values() ?? []) longest = Math.max(longest, rule.minDwellS ?? 0, rule.exitGraceS ?? 0);
    return longest * 1000;
  }

  private async detectionOf(organizationId: string, buildingId: number | null): Promise<BuildingDetection | undefined> {
    if (buildingId === null) return undefined;
    const { registry, engine } = this.deps;
    const runtime: BuildingRuntime | undefined = registry.peek(buildingId) ?? (await registry.get(organizationId, buildingId));
    return engine.buildings.of(runtime);
  }

  /**
   * New events and the superseded marks in one transaction, with the webhook deliveries the new events owe: a
   * reader never sees a correction without its mark, nor a webhook miss one.
   */
  private async store(added: ZoneEventRecord[], superseded: string[]): Promise<void> {
    const { storage, webhooks } = this.deps;
    const write = async (execute: Execute) => {
      if (superseded.length > 0)
        await execute('update zone_events set superseded = true where id = any(?::bigint[])', [pgArray(superseded)]);
      if (added.length === 0) return;
      const ids = await execute<{ id: string }>(
        `select nextval(pg_get_serial_sequence('zone_events', 'id'))::text as id from generate_series(1, ?)`,
        [added.length],
      );
      for (const [index, event] of added.entries()) event.id = String(ids[index]!.id);
      await insertZoneEvents(execute, added);
    };
    if (webhooks) await webhooks.storeLateZoneEvents(added, write);
    else
      await storage
        .em()
        .transactional((tx) => write(((sql: string, params: unknown[]) => (tx as EntityManager).execute(sql, params)) as Execute));
  }
}

/**
 * The replay's events against the stored ones of the same stretch: the replay's that are not stored yet (each
 * naming, in `supersedes`, the contradicted stored event of its type and zone nearest in time), and the ids of
 * the stored ones the replay does not produce.
 */
export function reconcile(
  produced: readonly ZoneEventRecord[],
  stored: readonly Pick<EventRow, 'id' | 'zone_kind' | 'zone_id' | 'type' | 'at_ms'>[],
): { added: ZoneEventRecord[]; superseded: string[] } {
  const unmatched = new Map<string, (typeof stored)[number][]>();
  for (const row of stored) {
    const key = keyOf(row.type, row.zone_kind, row.zone_id, row.at_ms);
    (unmatched.get(key) ?? unmatched.set(key, []).get(key)!).push(row);
  }
  const added: ZoneEventRecord[] = [];
  for (const event of produced) {
    const same = unmatched.get(keyOf(event.type, event.zoneKind, event.zoneId, event.at));
    if (same && same.length > 0) same.shift();
    else added.push({ ...event });
  }
  const contradicted = [...unmatched.values()].flat();
  for (const row of contradicted) {
    let best: ZoneEventRecord | undefined;
    for (const event of added) {
      if (event.supersedes != null || event.type !== row.type || event.zoneKind !== row.zone_kind || event.zoneId !== row.zone_id) continue;
      if (!best || Math.abs(event.at - row.at_ms) < Math.abs(best.at - row.at_ms)) best = event;
    }
    if (best) {
      best.supersedes = row.id;
      best.supersedesAt = row.at_ms;
    }
  }
  return { added, superseded: contradicted.map((row) => row.id) };
}

/** Fixes by device (`organizationId|deviceId`), each device's in their order. */
function byDeviceOf(records: readonly PositionRecord[]): Map<string, PositionRecord[]> {
  const byDevice = new Map<string, PositionRecord[]>();
  for (const record of records) {
    const key = `${record.organizationId}|${record.deviceId}`;
    (byDevice.get(key) ?? byDevice.set(key, []).get(key)!).push(record);
  }
  return byDevice;
}
