import { describe, expect, it } from 'vitest';
import { type DeadmanPosition, type DeadmanSettings, type DeadmanState, step, sweep } from '../../../shared/detection/deadman.detector.js';

const T0 = Date.UTC(2025, 0, 6, 9, 0, 0);
const s = (seconds: number) => T0 + seconds * 1000;
const at = (x: number, y = 0, floorId = 1, buildingId = 10): DeadmanPosition => ({ x, y, floorId, buildingId });

const still: DeadmanSettings = { deadmanAfterS: 60, deadmanRadiusM: 2 };
const silent: DeadmanSettings = { deadmanSilenceS: 30 };
const both: DeadmanSettings = { deadmanAfterS: 60, deadmanRadiusM: 2, deadmanSilenceS: 30 };

function feed(settings: DeadmanSettings, positions: [number, DeadmanPosition][], state?: DeadmanState): DeadmanState {
  for (const [second, position] of positions) state = step(state, position, settings, s(second));
  return state!;
}

/** Sweeps once a second over [from, to], as the engine's sweep does, and returns the alarms with the second they fired. */
function sweepEverySecond(settings: DeadmanSettings, state: DeadmanState, from: number, to: number) {
  const fired: [number, string, number][] = [];
  for (let second = from; second <= to; second++) {
    const result = sweep(state, settings, s(second));
    state = result.state;
    if (result.alarm) fired.push([second, result.alarm.reason, result.alarm.since]);
  }
  return { fired, state };
}

describe('dead-man: still', () => {
  it('fires once, just after deadman_after_s within the radius, dated from the anchor', () => {
    let state: DeadmanState | undefined;
    const fired: number[] = [];
    // 1 Hz positions wobbling 1.5 m: inside a 2 m radius, so still counts from the first one.
    for (let second = 0; second < 120; second++) {
      const result = sweep(step(state, at(second % 2 === 0 ? 0 : 1.5), still, s(second)), still, s(second));
      state = result.state;
      if (result.alarm) {
        expect(result.alarm).toEqual({ reason: 'still', since: s(0) });
        fired.push(second);
      }
    }
    expect(fired).toEqual([61]);
  });

  it('re-anchors and re-arms on movement beyond the radius or to another floor', () => {
    let state = feed(still, [[0, at(0)]]);
    ({ state } = sweepEverySecond(still, state, 0, 61));
    expect(state.firedStill).toBe(true);
    state = step(state, at(5), still, s(70));
    expect(state.anchor).toEqual({ x: 5, y: 0, floorId: 1, at: s(70) });
    expect(state.firedStill).toBe(false);
    expect(sweepEverySecond(still, state, 70, 140).fired).toEqual([[131, 'still', s(70)]]);
    const upstairs = step(state, at(5, 0, 2), still, s(80));
    expect(upstairs.anchor.at).toBe(s(80));
  });

  it('fires on time for a device that reports rarely, from the sweep', () => {
    const state = feed(still, [
      [0, at(0)],
      [45, at(1)],
    ]);
    expect(sweepEverySecond(still, state, 46, 100).fired).toEqual([[61, 'still', s(0)]]);
  });

  it('is off without both deadman_after_s and deadman_radius_m', () => {
    for (const settings of [{ deadmanAfterS: 60 }, { deadmanRadiusM: 2 }, {}]) {
      const state = feed(settings, [[0, at(0)]]);
      expect(sweepEverySecond(settings, state, 0, 600).fired).toEqual([]);
    }
  });
});

describe('dead-man: silence', () => {
  it('fires once, just after deadman_silence_s without a position, dated from the last one', () => {
    const state = feed(silent, [
      [0, at(0)],
      [10, at(20)],
    ]);
    expect(sweepEverySecond(silent, state, 10, 200).fired).toEqual([[41, 'silence', s(10)]]);
  });

  it('without a silence setting a quiet device never raises silence', () => {
    const state = feed(still, [
      [0, at(0)],
      [10, at(20)],
    ]);
    // Only `still` may fire (the last position is assumed to hold); never `silence`.
    expect(sweepEverySecond(still, state, 10, 500).fired.map((f) => f[1])).toEqual(['still']);
  });

  it('needs deadman_after_s of presence in the building first, when set', () => {
    const brief = feed(both, [
      [0, at(0)],
      [59, at(10)],
    ]);
    expect(sweepEverySecond(both, brief, 59, 300).fired).toEqual([]);
    const settled = feed(both, [
      [0, at(0)],
      [60, at(10)],
    ]);
    expect(sweepEverySecond(both, settled, 60, 300).fired).toEqual([[91, 'silence', s(60)]]);
  });

  it('with both on, still fires while reporting; once quiet, silence speaks instead of still', () => {
    const reporting = feed(both, [
      [0, at(0)],
      [60, at(0)],
    ]);
    expect(sweepEverySecond(both, reporting, 60, 300).fired).toEqual([
      [61, 'still', s(0)],
      [91, 'silence', s(60)],
    ]);
    // Anchored at 50 and quiet from 65: still would be due at 111, but the device is silent by then.
    const quiet = feed(both, [
      [0, at(0)],
      [50, at(10)],
      [65, at(10)],
    ]);
    expect(sweepEverySecond(both, quiet, 65, 300).fired).toEqual([[96, 'silence', s(65)]]);
  });

  it('re-arms when the device reappears, as a new session', () => {
    let state = feed(silent, [[0, at(0)]]);
    ({ state } = sweepEverySecond(silent, state, 0, 40));
    expect(state.firedSilence).toBe(true);
    state = step(state, at(0), silent, s(100));
    expect(state).toMatchObject({ firedSilence: false, firedStill: false, insideBuildingSince: s(100), lastSeenAt: s(100) });
    expect(state.anchor.at).toBe(s(100));
    expect(sweepEverySecond(silent, state, 100, 200).fired).toEqual([[131, 'silence', s(100)]]);
  });

  it('starts over in another building', () => {
    const state = step(feed(still, [[0, at(0)]]), at(0, 0, 1, 11), still, s(50));
    expect(state).toMatchObject({ buildingId: 11, insideBuildingSince: s(50), anchor: { at: s(50) } });
  });
});

describe('dead-man: sweep', () => {
  it('is pure: the alarm comes with a new state, the old one is untouched', () => {
    const state = feed(still, [[0, at(0)]]);
    const copy = structuredClone(state);
    const due = sweep(state, still, s(61));
    expect(due.alarm).toEqual({ reason: 'still', since: s(0) });
    expect(due.state).not.toBe(state);
    expect(due.state.firedStill).toBe(true);
    expect(state).toEqual(copy);
    expect(sweep(due.state, still, s(62)).alarm).toBeUndefined();
  });

  it('does nothing without settings', () => {
    const state = feed(both, [[0, at(0)]]);
    expect(sweep(state, undefined, s(10_000))).toEqual({ state });
  });
});

/** Sweeps once a second over [from, to] for a building whose detection resumed at `resumed` (a restart, a takeover). */
function sweepResumed(settings: DeadmanSettings, state: DeadmanState, resumed: number, from: number, to: number) {
  const fired: [number, string, number][] = [];
  for (let second = from; second <= to; second++) {
    const result = sweep(state, settings, s(second), s(resumed));
    state = result.state;
    if (result.alarm) fired.push([second, result.alarm.reason, result.alarm.since]);
  }
  return { fired, state };
}

describe('dead-man: our own absence (detection resumed after the last position)', () => {
  it('silence runs from the resumption: a device still silent a window later raises it, dated from its last position', () => {
    const state = feed(silent, [
      [0, at(0)],
      [10, at(20)],
    ]);
    // We were gone from 12 to 100: at 100 the device has been quiet 90 s, but only 0 s of it while watched.
    expect(sweepResumed(silent, state, 100, 100, 300).fired).toEqual([[131, 'silence', s(10)]]);
  });

  it('a device that reports within its window after the resumption raises nothing', () => {
    let state = feed(silent, [
      [0, at(0)],
      [10, at(20)],
    ]);
    // biome-ignore lint/style/useConst: assigned beside `state` in one destructuring
    let fired: [number, string, number][];
    ({ state, fired } = sweepResumed(silent, state, 100, 100, 125));
    expect(fired).toEqual([]);
    state = step(state, at(21), silent, s(126));
    expect(sweepResumed(silent, state, 100, 126, 156).fired).toEqual([]);
    expect(sweepResumed(silent, state, 100, 157, 157).fired).toEqual([[157, 'silence', s(126)]]);
  });

  it('a resumption before the last position changes nothing', () => {
    const state = feed(silent, [
      [0, at(0)],
      [10, at(20)],
    ]);
    expect(sweepResumed(silent, state, 5, 10, 200).fired).toEqual([[41, 'silence', s(10)]]);
  });

  it('stillness does not count the stretch nobody watched: last seen at 10, back at 100, still from 0 for 60 s fires at 151', () => {
    const state = feed(still, [
      [0, at(0)],
      [10, at(1)],
    ]);
    expect(sweepResumed(still, state, 100, 100, 300).fired).toEqual([[151, 'still', s(0)]]);
    // A position from the same spot after we are back shows the stillness went on: counted whole from the anchor.
    const seen = step(state, at(0.5), still, s(101));
    expect(sweepResumed(still, seen, 100, 101, 101).fired).toEqual([[101, 'still', s(0)]]);
  });

  it('with both on, a device back within its window raises no silence, and stillness counts only what was seen and watched', () => {
    const state = feed(both, [
      [0, at(0)],
      [30, at(10)],
      [60, at(10)],
    ]);
    // Without the rule, our gap from 60 to 200 is a silence at once.
    expect(sweepEverySecond(both, state, 200, 200).fired).toEqual([[200, 'silence', s(60)]]);
    // With it: nothing for a window after 200 (still: 30 s seen + 30 s watched is not over 60), then silence speaks.
    expect(sweepResumed(both, state, 200, 200, 240).fired).toEqual([[231, 'silence', s(60)]]);
    const moved = step(state, at(30), both, s(205));
    expect(sweepResumed(both, moved, 200, 205, 235).fired).toEqual([]);
  });
});
