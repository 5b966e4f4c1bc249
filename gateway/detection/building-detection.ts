import type { DeadmanSettings } from '../../shared/detection/deadman.detector.js';
import type { StormSettings } from '../../shared/detection/storm.detector.js';
import { maxStayRulesOf, type MaxStayRules } from '../../shared/detection/max-stay.detector.js';
import { transitionRulesOf, type TransitionRules } from '../../shared/detection/transition.detector.js';
import { ZoneIndex, zoneKey, zonesFromCartography, type ZoneKind } from '../../shared/detection/zone-index.js';
import type { CartographyEvent, Geofence } from '../../shared/storage/entities/index.js';
import type { BuildingRuntime } from '../realtime/building-registry.js';

/** What a zone key names: the zone's kind and the id it is stored and pushed under (geofence uuid, event id). */
export interface ZoneRef {
  kind: ZoneKind;
  storedId: string;
}

/** What detection needs of a building, derived once per cartography version. */
export interface BuildingDetection {
  index: ZoneIndex;
  /** Every zone key the cartography names (an event names its conversion area's too), with what it is. */
  zones: Map<string, ZoneRef>;
  transitionRules: TransitionRules;
  maxStayRules: MaxStayRules;
  deadman: DeadmanSettings;
  storm: StormSettings;
  /** By zone key. */
  geofences: Map<string, Geofence>;
  /** By zone key: the event of an event area and of its conversion area. */
  events: Map<string, CartographyEvent>;
}

/** Builds what detection needs of a building from its runtime (the spatial index above all). */
export function buildingDetection(runtime: BuildingRuntime): BuildingDetection {
  const { building } = runtime;
  const zones = new Map<string, ZoneRef>();
  const geofences = new Map<string, Geofence>();
  const events = new Map<string, CartographyEvent>();
  for (const geofence of runtime.geofences) {
    const key = zoneKey('geofence', geofence.id);
    zones.set(key, { kind: 'geofence', storedId: geofence.id });
    geofences.set(key, geofence);
  }
  for (const event of runtime.events) {
    for (const kind of ['event', 'conversion'] as const) {
      const key = zoneKey(kind, event.id);
      zones.set(key, { kind, storedId: String(event.id) });
      events.set(key, event);
    }
  }
  return {
    index: new ZoneIndex(zonesFromCartography(runtime.geofences, runtime.events)),
    zones,
    transitionRules: transitionRulesOf(runtime.geofences),
    maxStayRules: maxStayRulesOf(runtime.geofences),
    deadman: { deadmanAfterS: building.deadmanAfterS, deadmanRadiusM: building.deadmanRadiusM, deadmanSilenceS: building.deadmanSilenceS },
    storm: { stormShare: building.stormShare, stormMinDevices: building.stormMinDevices },
    geofences,
    events,
  };
}

/**
 * The detection of each loaded building, built the first time a detector asks for it. Keyed by the runtime
 * object: the registry loads a new one for each cartography version, so a change is picked up with it, and a
 * runtime the registry dropped takes its detection with it.
 *
 * It also remembers what every zone key met here names, so a zone gone from the cartography (its device exits it
 * after its grace) or known only from storage (a stay restored) is still told by its data, never by its key.
 */
export class BuildingDetections {
  private readonly built = new WeakMap<BuildingRuntime, BuildingDetection>();
  /** One small record per zone met, removed ones included (few: cartography changes are rare). */
  private readonly met = new Map<string, ZoneRef>();

  of(runtime: BuildingRuntime): BuildingDetection;
  of(runtime: BuildingRuntime | undefined): BuildingDetection | undefined;
  of(runtime: BuildingRuntime | undefined): BuildingDetection | undefined {
    if (!runtime) return undefined;
    let detection = this.built.get(runtime);
    if (!detection) {
      this.built.set(runtime, (detection = buildingDetection(runtime)));
      for (const [key, zone] of detection.zones) this.met.set(key, zone);
    }
    return detection;
  }

  /** The key of a zone as storage names it (a stored zone event's kind and id). */
  keyOf(kind: ZoneKind, storedId: string): string {
    const key = zoneKey(kind, storedId);
    if (!this.met.has(key)) this.met.set(key, { kind, storedId });
    return key;
  }

  /** What a zone key met here names (every key a detector holds was: from a building's cartography, or from storage). */
  zoneOf(key: string): ZoneRef {
    const zone = this.met.get(key);
    if (!zone) throw new Error(`zone key ${key} was not met by this gateway's detection`);
    return zone;
  }
}
