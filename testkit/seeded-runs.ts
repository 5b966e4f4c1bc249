/**
 * `.ci/run` sets FLOORCAST_FULL_RUNS=1: the seeded fuzz tests then play their full run counts; `npm test` plays
 * fewer runs of the same seeds, to stay within a few minutes (docs/testing.md).
 */
const FULL_RUNS = process.env.FLOORCAST_FULL_RUNS === '1';

/** A seeded property's run count: `full` in `.ci/run`, `quick` in `npm test`. */
export const seededRuns = (full: number, quick: number): number => (FULL_RUNS ? full : quick);
