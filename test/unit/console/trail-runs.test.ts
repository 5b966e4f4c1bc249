import { describe, expect, it } from 'vitest';
import { lateRunText, trailRuns, type TrailPoint } from '../../../console/src/floor-map.js';

const MIN = 60_000;
const fix = (x: number, delayMs = 300): TrailPoint => ({ floorId: 1, x, y: 0, at: x * 1000, late: delayMs > 2000, delayMs });

describe("the console's trail runs (issue 30: the late part of a trail is drawn dashed)", () => {
  it('keeps a trail that came on time as one solid run', () => {
    const runs = trailRuns([fix(0), fix(1), fix(2)]);
    expect(runs.map((run) => ({ late: run.late, xs: run.points.map((p) => p.x) }))).toEqual([{ late: false, xs: [0, 1, 2] }]);
  });

  it('dashes from the last on-time fix before a late stretch to the first after it, sharing the ends', () => {
    const runs = trailRuns([fix(0), fix(1), fix(2, 4 * MIN), fix(3, 3 * MIN), fix(4, MIN), fix(5), fix(6)]);
    expect(runs.map((run) => ({ late: run.late, xs: run.points.map((p) => p.x), lateXs: run.lateFixes.map((p) => p.x) }))).toEqual([
      { late: false, xs: [0, 1], lateXs: [] },
      { late: true, xs: [1, 2, 3, 4, 5], lateXs: [2, 3, 4] },
      { late: false, xs: [5, 6], lateXs: [] },
    ]);
    expect(lateRunText(runs[1]!)).toBe('late by up to 4 min');
  });

  it('draws a trail that begins or ends late, and two late stretches apart', () => {
    const runs = trailRuns([fix(0, 5 * MIN), fix(1), fix(2), fix(3, 90_000)]);
    expect(runs.map((run) => [run.late, run.points.map((p) => p.x)])).toEqual([
      [true, [0, 1]],
      [false, [1, 2]],
      [true, [2, 3]],
    ]);
    expect(lateRunText(runs[0]!)).toBe('late by 5 min');
    expect(lateRunText(runs[2]!)).toBe('late by 1 min');
  });

  it('says nothing of a run that is not late; one fix alone is a run of its own; none is none', () => {
    expect(lateRunText(trailRuns([fix(0), fix(1)])[0]!)).toBe('');
    expect(trailRuns([fix(0, 30_000)])).toEqual([{ late: true, points: [fix(0, 30_000)], lateFixes: [fix(0, 30_000)] }]);
    expect(lateRunText(trailRuns([fix(0, 30_000)])[0]!)).toBe('late by 30 s');
    expect(trailRuns([])).toEqual([]);
  });
});
