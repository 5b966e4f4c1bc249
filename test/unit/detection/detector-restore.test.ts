import { describe, expect, it } from 'vitest';
import * as deadman from '../../../shared/detection/deadman.detector.js';
import * as maxStay from '../../../shared/detection/max-stay.detector.js';
import * as transition from '../../../shared/detection/transition.detector.js';

const T0 = Date.UTC(2025, 0, 6, 9, 0, 0);
const s = (seconds: number) => T0 + seconds * 1000;
const here = (x: number, floorId = 1) => ({ x, y: 0, floorId, buildingId: 1 });

describe('transition.restoredState', () => {
  const restored = transition.restoredState(new Map([['fence', s(0)]]), 1);

  it('is confirmed inside since the stored enter: staying inside emits nothing, leaving exits with that stay', () => {
    expect(transition.confirmedInside(restored)).toEqual(new Map([['fence', s(0)]]));
    const stay = transition.step(restored, { zoneIds: ['fence'], floorId: 1 }, new Map(), s(10));
    expect(stay.transitions).toEqual([]);
    expect(stay.state).toBe(restored);
    expect(transition.step(restored, { zoneIds: [], floorId: 1 }, new Map(), s(10)).transitions).toEqual([
      { type: 'exit', zoneId: 'fence', at: s(10), firedAt: s(10) },
    ]);
  });

  it('is outside every zone it was not given: being inside one enters it', () => {
    expect(transition.step(restored, { zoneIds: ['fence', 'other'], floorId: 1 }, new Map(), s(10)).transitions).toEqual([
      { type: 'enter', zoneId: 'other', at: s(10), firedAt: s(10) },
    ]);
  });
});

describe('maxStay.restoredState', () => {
  const rules = new Map([
    ['a', 30],
    ['b', 30],
  ]);

  it('runs each stay from its stored enter and keeps one already alarmed from firing again', () => {
    const restored = maxStay.restoredState(
      new Map([
        ['a', s(0)],
        ['b', s(0)],
      ]),
      new Set(['b']),
    );
    expect(maxStay.sweep(restored, rules, s(30)).alarms).toEqual([]);
    const due = maxStay.sweep(restored, rules, s(31));
    expect(due.alarms.map((alarm) => [alarm.zoneId, alarm.enteredAt])).toEqual([['a', s(0)]]);
    expect(maxStay.sweep(due.state, rules, s(60)).alarms).toEqual([]);
  });
});

describe('deadman.restoredState', () => {
  const settings = { deadmanAfterS: 60, deadmanRadiusM: 2, deadmanSilenceS: 30 };
  const trail = (...entries: [number, number | null][]) =>
    entries.map(([second, x]) => ({ at: s(second), position: x === null ? null : here(x) }));

  it('is what following the same positions live gives: the same alarms, with the same `since`', () => {
    const positions = trail([0, 0], [10, 5], [20, 5.5], [40, 6], [75, 6.2]);
    let live: deadman.DeadmanState | undefined;
    for (const { position, at } of positions) live = deadman.step(live, position!, settings, at);
    const restored = deadman.restoredState(positions, settings)!;
    expect(restored).toEqual(live);
    // Still since 10 s (anchor moved there), so due after 70 s; silent after 105 s.
    expect(deadman.sweep(restored, settings, s(71)).alarm).toEqual({ reason: 'still', since: s(10) });
    expect(deadman.sweep(restored, settings, s(106)).alarm).toEqual({ reason: 'silence', since: s(75) });
  });

  it('replays the sweeps between positions: a stillness already past its time within the trail is fired', () => {
    const restored = deadman.restoredState(trail([0, 0], [29, 0.5], [58, 0.5], [87, 1]), settings)!;
    expect(restored.firedStill).toBe(true);
    expect(deadman.sweep(restored, settings, s(100)).alarm).toBeUndefined();
  });

  it('starts a new session after a gap past the silence, as the live detector does after firing it', () => {
    const restored = deadman.restoredState(trail([0, 0], [61, 0], [100, 0]), settings)!;
    expect(restored.insideBuildingSince).toBe(s(100));
    expect(restored.anchor.at).toBe(s(100));
  });

  it('forgets what came before a position outside the building, and is nothing when the latest is outside', () => {
    expect(deadman.restoredState(trail([0, 0], [10, null], [20, 0]), settings)!.insideBuildingSince).toBe(s(20));
    expect(deadman.restoredState(trail([0, 0], [10, null]), settings)).toBeUndefined();
  });

  it('takes an alarmed stillness older than the trail as its anchor when the trail never moved: no second alarm', () => {
    const patient = { ...settings, deadmanSilenceS: 300 };
    const positions = trail([100, 0], [110, 0.5], [120, 1]);
    const restored = deadman.restoredState(positions, patient, { stillAlarmedSince: s(5) })!;
    expect(restored).toMatchObject({ anchor: { at: s(5) }, firedStill: true, insideBuildingSince: s(5) });
    expect(deadman.sweep(restored, patient, s(161)).alarm).toBeUndefined();
    // Without it the trail's own anchor would fire a second, differently keyed, alarm.
    expect(deadman.sweep(deadman.restoredState(positions, patient)!, patient, s(161)).alarm).toEqual({ reason: 'still', since: s(100) });
  });

  it('counts a session reaching back past a truncated trail as present long enough, and only then', () => {
    const positions = trail([100, 0], [110, 0.5], [120, 1]);
    expect(deadman.sweep(deadman.restoredState(positions, settings)!, settings, s(151)).alarm).toBeUndefined();
    expect(deadman.sweep(deadman.restoredState(positions, settings, { truncated: true })!, settings, s(151)).alarm).toEqual({
      reason: 'silence',
      since: s(120),
    });
    const arrived = trail([90, null], [100, 0], [110, 0.5], [120, 1]);
    expect(deadman.sweep(deadman.restoredState(arrived, settings, { truncated: true })!, settings, s(151)).alarm).toBeUndefined();
  });

  it('ignores an alarmed stillness the trail has moved since', () => {
    const restored = deadman.restoredState(trail([100, 0], [110, 10], [120, 10]), settings, { stillAlarmedSince: s(5) })!;
    expect(restored).toMatchObject({ anchor: { at: s(110) }, firedStill: false });
  });
});
