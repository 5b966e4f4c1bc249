import * as transition from '../../../shared/detection/transition.detector.js';
import type { Zone, ZoneIndex } from '../../../shared/detection/zone-index.js';
import type { BuildingDetection, BuildingDetections, ZoneRef } from '../building-detection.js';
import type { DetectedDevice, Detector, DetectorContext, Fix, Leave, StoredDevice, Sweep } from '../detector.js';
import type { Detections, ZoneEventRecord } from '../detections.js';

/** Who and where a zone event is about: the device and the floor of the fix that decided it. */
export interface ZoneEventSubject {
  organizationId: string;
  buildingId: number;
  floorId: number | null;
  deviceId: string;
  userId: string | null;
}

/** The stored and pushed form of one transition of `zone` (its kind and id from the zone's data; names from the building). */
export function zoneEventOf(
  subject: ZoneEventSubject,
  detection: BuildingDetection,
  zone: ZoneRef,
  change: transition.ZoneTransition,
): ZoneEventRecord {
  const geofence = zone.kind === 'geofence' ? detection.geofences.get(change.zoneId) : undefined;
  const event = zone.kind === 'geofence' ? undefined : detection.events.get(change.zoneId);
  return {
    organizationId: subject.organizationId,
    buildingId: subject.buildingId,
    floorId: subject.floorId,
    zoneKind: zone.kind,
    zoneId: zone.storedId,
    zoneName: geofence?.name ?? event?.name ?? '',
    deviceId: subject.deviceId,
    userId: subject.userId,
    type: change.type,
    at: change.at,
    firedAt: change.firedAt,
  };
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

export const ZONES = 'zones';

const NO_RULES: transition.TransitionRules = new Map();

/**
 * Enters and exits of geofences, event areas and conversion areas (shared/detection/transition.detector.ts), on
 * fix time; an event area entered also sends its content to the device.
 */
export class ZoneDetector implements Detector<transition.TransitionState> {
  readonly name = ZONES;
  readonly clock = 'event' as const;
  /** The zones of the position being observed: filled afresh for each, so tagging allocates nothing. */
  private readonly tagged = new TaggedZones();
  private readonly buildings: BuildingDetections;

  constructor(context: DetectorContext) {
    this.buildings = context.buildings;
  }

  initial(): transition.TransitionState {
    return transition.initialTransitionState();
  }

  observe(state: transition.TransitionState, fix: Fix, out: Detections): transition.TransitionState {
    const { detection, floorId } = fix;
    if (!detection) return state;
    const zoneIds = this.tagged.of(detection.index, floorId, fix.x, fix.y);
    const stepped = transition.step(state, { zoneIds, floorId }, detection.transitionRules, fix.record.timestamp);
    this.collect(fix.device, detection, stepped.transitions, out);
    return stepped.state;
  }

  sweep(state: transition.TransitionState, sweep: Sweep, out: Detections): transition.TransitionState {
    const swept = transition.sweep(state, sweep.detection.transitionRules, sweep.eventNow);
    this.collect(sweep.device, sweep.detection, swept.transitions, out);
    return swept.state;
  }

  /** Leaving a building (or its floors' coverage) closes every open stay there at once. */
  leave(state: transition.TransitionState, leave: Leave, out: Detections): void {
    const left = transition.step(state, { zoneIds: [], floorId: null }, NO_RULES, leave.at);
    if (leave.detection) this.collect(leave.device, leave.detection, left.transitions, out);
  }

  /** Inside each zone whose latest stored event is an enter, since its `at`. */
  restore(stored: StoredDevice): transition.TransitionState {
    const inside = new Map<string, number>();
    for (const [zoneId, stay] of stored.stays) inside.set(zoneId, stay.enteredAt);
    return transition.restoredState(inside, stored.last.floorId);
  }

  private collect(
    device: DetectedDevice,
    detection: BuildingDetection,
    transitions: readonly transition.ZoneTransition[],
    out: Detections,
  ): void {
    for (const change of transitions) {
      const zone = this.buildings.zoneOf(change.zoneId);
      out.zoneEvents.push(zoneEventOf(device as ZoneEventSubject, detection, zone, change));
      const event = zone.kind === 'event' ? detection.events.get(change.zoneId) : undefined;
      if (change.type === 'enter' && event) {
        out.triggered.push({
          organizationId: device.organizationId,
          deviceId: device.deviceId,
          userId: device.userId,
          event: { id: event.id, buildingId: event.buildingId, name: event.name, info: event.info, url: event.url ?? null },
        });
      }
    }
  }
}
