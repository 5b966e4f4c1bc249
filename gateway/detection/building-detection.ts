import type { DeadmanSettings } from '../../shared/detection/deadman.detector.js';
import type { StormSettings } from '../../shared/detection/storm.detector.js';
import { maxStayRulesOf, type MaxStayRules } from '../../shared/detection/max-stay.detector.js';
import { transitionRulesOf, type TransitionRules } from '../../shared/detection/transition.detector.js';
import { ZoneIndex, zonesFromCartography, type Zone } from '../../shared/detection/zone-index.js';
import type { CartographyEvent, Geofence } from '../../shared/storage/entities/index.js';
import type { BuildingRuntime } from '../realtime/building-registry.js';

/** What detection needs of a building, derived once per cartography version. */
export interface BuildingDetection {
  index: ZoneIndex;
  zones: Map<string, Zone>;
  transitionRules: TransitionRules;
  maxStayRules: MaxStayRules;
  deadman: DeadmanSettings;
  storm: StormSettings;
  geofences: Map<string, Geofence>;
  events: Map<string, CartographyEvent>;
}

/** Builds what detection needs of a building from its runtime (the spatial index above all). */
export function buildingDetection(runtime: BuildingRuntime): BuildingDetection {
  const zones = zonesFromCartography(runtime.geofences, runtime.events);
  const { building } = runtime;
  return {
    index: new ZoneIndex(zones),
    zones: new Map(zones.map((zone) => [zone.id, zone])),
    transitionRules: transitionRulesOf(runtime.geofences),
    maxStayRules: maxStayRulesOf(runtime.geofences),
    deadman: { deadmanAfterS: building.deadmanAfterS, deadmanRadiusM: building.deadmanRadiusM, deadmanSilenceS: building.deadmanSilenceS },
    storm: { stormShare: building.stormShare, stormMinDevices: building.stormMinDevices },
    geofences: new Map(runtime.geofences.map((geofence) => [geofence.id, geofence])),
    events: new Map(runtime.events.flatMap((event) => [[`event:${event.id}`, event] as const, [`conversion:${event.id}`, event] as const])),
  };
}

/**
 * The detection of each loaded building, built the first time a detector asks for it. Keyed by the runtime
 * object: the registry loads a new one for each cartography version, so a change is picked up with it, and a
 * runtime the registry dropped takes its detection with it.
 */
export class BuildingDetections {
  private readonly built = new WeakMap<BuildingRuntime, BuildingDetection>();

  of(runtime: BuildingRuntime): BuildingDetection;
  of(runtime: BuildingRuntime | undefined): BuildingDetection | undefined;
  of(runtime: BuildingRuntime | undefined): BuildingDetection | undefined {
    if (!runtime) return undefined;
    let detection = this.built.get(runtime);
    if (!detection) this.built.set(runtime, (detection = buildingDetection(runtime)));
    return detection;
  }
}
