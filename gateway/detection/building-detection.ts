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

const detections = new WeakMap<BuildingRuntime, BuildingDetection>();

/** The registry extension: builds the spatial index as the building runtime loads. */
export function attachDetection(runtime: BuildingRuntime): void {
  const zones = zonesFromCartography(runtime.geofences, runtime.events);
  const { building } = runtime;
  detections.set(runtime, {
    index: new ZoneIndex(zones),
    zones: new Map(zones.map((zone) => [zone.id, zone])),
    transitionRules: transitionRulesOf(runtime.geofences),
    maxStayRules: maxStayRulesOf(runtime.geofences),
    deadman: { deadmanAfterS: building.deadmanAfterS, deadmanRadiusM: building.deadmanRadiusM, deadmanSilenceS: building.deadmanSilenceS },
    storm: { stormShare: building.stormShare, stormMinDevices: building.stormMinDevices },
    geofences: new Map(runtime.geofences.map((geofence) => [geofence.id, geofence])),
    events: new Map(runtime.events.flatMap((event) => [[`event:${event.id}`, event] as const, [`conversion:${event.id}`, event] as const])),
  });
}

export const detectionOf = (runtime: BuildingRuntime | undefined): BuildingDetection | undefined => (runtime ? detections.get(runtime) : undefined);
