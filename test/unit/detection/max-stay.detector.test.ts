import { describe, expect, it } from 'vitest';
import {
  type MaxStayAlarm,
  type MaxStayState,
  initialMaxStayState,
  maxStayRulesOf,
  step,
  sweep,
} from '../../../shared/detection/max-stay.detector.js';

const T0 = Date.UTC(2025, 0, 6, 9, 0, 0);
const s = (seconds: number) => T0 + seconds * 1000;
const rules = new Map([['f', 60]]);

function run(observations: [number, string[]][], state: MaxStayState = initialMaxStayState()) {
  const alarms: MaxStayAlarm[] = [];
  for (const [second, insideZoneIds] of observations) {
    const result = step(state, { insideZoneIds, now: s(second) }, rules);
    state = result.state;
    alarms.push(...result.alarms);
  }
  return { state, alarms };
}

describe('max stay step', () => {
  it('does not fire at exactly max_stay_time, fires one second later', () => {
    expect(
      run([
        [0, ['f']],
        [60, ['f']],
      ]).alarms,
    ).toEqual([]);
    expect(
      run([
        [0, ['f']],
        [60, ['f']],
        [61, ['f']],
      ]).alarms,
    ).toEqual([{ zoneId: 'f', enteredAt: s(0), stayedS: 61, maxStayTimeS: 60 }]);
  });

  it('fires once per stay, however long it lasts', () => {
    const observations: [number, string[]][] = Array.from({ length: 300 }, (_, i) => [i, ['f']]);
    expect(run(observations).alarms).toHaveLength(1);
  });

  it('fires again for a new stay after leaving', () => {
    const { alarms } = run([
      [0, ['f']],
      [61, ['f']],
      [62, []],
      [100, ['f']],
      [160, ['f']],
      [161, ['f']],
    ]);
    expect(alarms.map((a) => a.enteredAt)).toEqual([s(0), s(100)]);
  });

  it('counts the stay from the debounced enter, not from its confirmation', () => {
    const result = step(initialMaxStayState(), { insideZoneIds: ['f'], now: s(5), enteredAt: new Map([['f', s(0)]]) }, rules);
    expect(step(result.state, { insideZoneIds: ['f'], now: s(61) }, rules).alarms).toEqual([
      { zoneId: 'f', enteredAt: s(0), stayedS: 61, maxStayTimeS: 60 },
    ]);
  });

  it('never fires for a zone without a rule', () => {
    const state = { stays: {} };
    const result = step(state, { insideZoneIds: ['event:1'], now: s(0) }, rules);
    expect(step(result.state, { insideZoneIds: ['event:1'], now: s(10_000) }, rules).alarms).toEqual([]);
  });

  it('reads rules from geofence rows, ignoring null', () => {
    expect(
      maxStayRulesOf([
        { id: 'a', maxStayTime: 30 },
        { id: 'b', maxStayTime: null },
      ]),
    ).toEqual(new Map([['a', 30]]));
  });
});

describe('max stay sweep', () => {
  it('raises the alarm without a new position, once', () => {
    const { state } = run([[0, ['f']]]);
    expect(sweep(state, rules, s(60)).alarms).toEqual([]);
    const due = sweep(state, rules, s(61));
    expect(due.alarms).toEqual([{ zoneId: 'f', enteredAt: s(0), stayedS: 61, maxStayTimeS: 60 }]);
    expect(sweep(due.state, rules, s(62)).alarms).toEqual([]);
    expect(step(due.state, { insideZoneIds: ['f'], now: s(63) }, rules).alarms).toEqual([]);
  });

  it('leaves the state object alone when nothing is due', () => {
    const { state } = run([[0, ['f']]]);
    const copy = structuredClone(state);
    expect(sweep(state, rules, s(10)).state).toBe(state);
    sweep(state, rules, s(100));
    expect(state).toEqual(copy);
  });
});

describe('max stay step when nothing changes', () => {
  it('hands back the same state until a stay falls due, then fires once', () => {
    const entered = run([[0, ['f']]]).state;
    const later = step(entered, { insideZoneIds: ['f'], now: s(30) }, rules);
    expect(later.state).toBe(entered);
    expect(later.alarms).toEqual([]);
    const due = step(entered, { insideZoneIds: ['f'], now: s(61) }, rules);
    expect(due.alarms).toHaveLength(1);
    expect(step(due.state, { insideZoneIds: ['f'], now: s(62) }, rules).state).toBe(due.state);
    expect(step(entered, { insideZoneIds: [], now: s(30) }, rules).state.stays).toEqual({});
  });
});

describe('max stay across our own absence (detection resumed after the last position)', () => {
  const entered = step(initialMaxStayState(), { insideZoneIds: ['f'], now: s(0) }, rules).state;
  const watch = { lastSeenAt: s(10), watchedSince: s(100) };

  it('a sweep does not count the stretch between the last position and the resumption', () => {
    const fired: number[] = [];
    let state = entered;
    for (let second = 100; second <= 200; second++) {
      const result = sweep(state, rules, s(second), watch);
      state = result.state;
      fired.push(...result.alarms.map(() => second));
      if (result.alarms.length) expect(result.alarms[0]).toEqual({ zoneId: 'f', enteredAt: s(0), stayedS: 61, maxStayTimeS: 60 });
    }
    // 10 s seen before the gap, then 51 s watched since 100.
    expect(fired).toEqual([151]);
  });

  it('a position inside after the resumption shows the stay went on: it fires on that position', () => {
    expect(sweep(entered, rules, s(101), watch).alarms).toEqual([]);
    const { alarms } = step(entered, { insideZoneIds: ['f'], now: s(101) }, rules);
    expect(alarms).toEqual([{ zoneId: 'f', enteredAt: s(0), stayedS: 101, maxStayTimeS: 60 }]);
  });

  it('without a gap (resumed before the last position) the stay counts as before', () => {
    expect(sweep(entered, rules, s(61), { lastSeenAt: s(10), watchedSince: s(5) }).alarms).toHaveLength(1);
  });
});
