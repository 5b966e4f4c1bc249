import type { Detector, DetectorContext } from '../detector.js';
import { DeadmanDetector } from './deadman.js';
import { StayDetector } from './stays.js';
import { ZoneDetector } from './zones.js';

/**
 * Every detector the engine runs, in the order it runs them at each fix and each sweep (so in the order of what
 * they emit). A new detector is a file of this folder implementing `Detector` (gateway/detection/detector.ts) and
 * one line here. Stays follow the zones confirmed, so they come after them; dead-man's stillness was always raised
 * after the stays a sweep found.
 */
export const createDetectors = (context: DetectorContext): readonly Detector[] => [
  new ZoneDetector(context),
  new StayDetector(context),
  new DeadmanDetector(context),
];
