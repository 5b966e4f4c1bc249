import { describe, expect, it } from 'vitest';
import {
  type TransitionRules,
  type TransitionState,
  type ZoneTransition,
  confirmedInside,
  initialTransitionState,
  step,
  sweep,
  transitionRulesOf,
} from '../../../shared/detection/transition.detector.js';

const T0 = Date.UTC(2025, 0, 6, 9, 0, 0);
const s = (seconds: number) => T0 + seconds * 1000;

/** Feeds one observation per entry, `[second, zones]`, and collects every transition. */
function run(rules: TransitionRules, observations: [number, string[]][], state: TransitionState = initialTransitionState()) {
  const transitions: ZoneTransition[] = [];
  for (const [second, zoneIds] of observations) {
    const result = step(state, { zoneIds, floorId: 1 }, rules, s(second));
    state = result.state;
    transitions.push(...result.transitions);
  }
  return { state, transitions };
}

/** 1 Hz positions alternating inside/outside the fence `f` for `seconds` seconds, starting inside. */
const jitter = (seconds: number): [number, string[]][] =>
  Array.from({ length: seconds }, (_, i) => [i, i % 2 === 0 ? ['f'] : []] as [number, string[]]);

const none: TransitionRules = new Map();
const debounced: TransitionRules = new Map([['f', { minDwellS: 5, exitGraceS: 5 }]]);

describe('transition step without debounce', () => {
  it('turns 1 Hz boundary jitter into enter/exit pairs', () => {
    const { transitions } = run(none, jitter(6));
    expect(transitions.map((t) => [t.type, t.at])).toEqual([
      ['enter', s(0)],
      ['exit', s(1)],
      ['enter', s(2)],
      ['exit', s(3)],
      ['enter', s(4)],
      ['exit', s(5)],
    ]);
    expect(transitions.every((t) => t.firedAt === t.at)).toBe(true);
  });

  it('emits nothing while the tags do not change', () => {
    const { transitions } = run(none, [
      [0, ['f']],
      [1, ['f']],
      [2, ['f']],
    ]);
    expect(transitions).toHaveLength(1);
  });

  it('reports exits before enters when moving between adjacent zones', () => {
    // Named so that sorting by id alone would put the enter first.
    const { transitions } = run(none, [
      [0, ['b']],
      [1, ['a']],
    ]);
    expect(transitions.slice(1).map((t) => [t.type, t.zoneId])).toEqual([
      ['exit', 'b'],
      ['enter', 'a'],
    ]);
  });
});

describe('transition step with debounce', () => {
  it('turns the same jitter into nothing with min_dwell 5 s and exit_grace 5 s', () => {
    const { state, transitions } = run(debounced, jitter(60));
    expect(transitions).toEqual([]);
    expect(confirmedInside(state).size).toBe(0);
  });

  it('enters once the zone has been seen for min_dwell, dated from the first sighting', () => {
    const observations: [number, string[]][] = [
      [0, ['f']],
      [1, ['f']],
      [2, ['f']],
      [3, ['f']],
      [4, ['f']],
    ];
    expect(run(debounced, observations).transitions).toEqual([]); // 4 s < 5 s
    const { state, transitions } = run(debounced, [...observations, [5, ['f']], [6, ['f']]]);
    expect(transitions).toEqual([{ type: 'enter', zoneId: 'f', at: s(0), firedAt: s(5) }]);
    expect(confirmedInside(state)).toEqual(new Map([['f', s(0)]]));
  });

  it('restarts the dwell after one position outside', () => {
    const { transitions } = run(debounced, [
      [0, ['f']],
      [3, ['f']],
      [4, []],
      [5, ['f']],
      [9, ['f']],
      [10, ['f']],
    ]);
    expect(transitions).toEqual([{ type: 'enter', zoneId: 'f', at: s(5), firedAt: s(10) }]);
  });

  it('exits only after exit_grace continuously out, dated from the first position out', () => {
    const inside = run(debounced, [
      [0, ['f']],
      [5, ['f']],
    ]).state;
    expect(
      run(
        debounced,
        [
          [6, []],
          [8, ['f']],
          [9, []],
          [13, []],
        ],
        inside,
      ).transitions,
    ).toEqual([]);
    expect(
      run(
        debounced,
        [
          [6, []],
          [8, ['f']],
          [9, []],
          [14, []],
        ],
        inside,
      ).transitions,
    ).toEqual([{ type: 'exit', zoneId: 'f', at: s(9), firedAt: s(14) }]);
  });

  it('reads its rules from geofence rows; a zone without a rule is immediate', () => {
    const rules = transitionRulesOf([{ id: 'f', minDwellS: 5, exitGraceS: 0 }]);
    const { transitions } = run(rules, [
      [0, ['f', 'event:1']],
      [1, []],
    ]);
    expect(transitions.map((t) => [t.type, t.zoneId])).toEqual([
      ['enter', 'event:1'],
      ['exit', 'event:1'],
    ]);
  });
});

describe('transition sweep', () => {
  it('settles an exit grace that elapsed after the device went quiet', () => {
    const { state } = run(debounced, [
      [0, ['f']],
      [5, ['f']],
      [10, []],
    ]);
    expect(sweep(state, debounced, s(14)).transitions).toEqual([]);
    const settled = sweep(state, debounced, s(15));
    expect(settled.transitions).toEqual([{ type: 'exit', zoneId: 'f', at: s(10), firedAt: s(15) }]);
    expect(settled.state.zones).toEqual({});
    // Settled once: the next sweep and the next position outside add nothing.
    expect(sweep(settled.state, debounced, s(20)).transitions).toEqual([]);
    expect(step(settled.state, { zoneIds: [] }, debounced, s(21)).transitions).toEqual([]);
  });

  it('settles a side that held for its threshold before a contrary fix, as a sweep between them would have (event time)', () => {
    // Seen inside at 0 s, next fix outside at 10 s: inside held 10 s >= min_dwell 5 s, whether or not a sweep ran at 5 s.
    const rare = run(debounced, [
      [0, ['f']],
      [10, []],
    ]);
    const swept = run(debounced, [[10, []]], sweep(run(debounced, [[0, ['f']]]).state, debounced, s(5)).state);
    expect(rare.transitions).toEqual([{ type: 'enter', zoneId: 'f', at: s(0), firedAt: s(5) }]);
    expect(rare.state).toEqual(swept.state);
    expect(rare.state.zones).toEqual({ f: { enteredAt: s(0), pendingSince: s(10) } });
    // And out again: outside from 10 s held the 5 s grace by the fix back inside at 20 s.
    expect(run(debounced, [[20, ['f']]], rare.state).transitions).toEqual([{ type: 'exit', zoneId: 'f', at: s(10), firedAt: s(15) }]);
    // Without a dwell, the fix back is an enter at once.
    const graceOnly: TransitionRules = new Map([['f', { exitGraceS: 5 }]]);
    expect(
      run(graceOnly, [
        [0, ['f']],
        [10, []],
        [20, ['f']],
      ]).transitions,
    ).toEqual([
      { type: 'enter', zoneId: 'f', at: s(0), firedAt: s(0) },
      { type: 'exit', zoneId: 'f', at: s(10), firedAt: s(15) },
      { type: 'enter', zoneId: 'f', at: s(20), firedAt: s(20) },
    ]);
  });

  it('settles a pending enter of a device standing still and reporting rarely', () => {
    const { state } = run(debounced, [[0, ['f']]]);
    expect(sweep(state, debounced, s(5)).transitions).toEqual([{ type: 'enter', zoneId: 'f', at: s(0), firedAt: s(5) }]);
  });

  it('leaves settled zones alone, even without any grace', () => {
    const { state } = run(none, [[0, ['f']]]);
    expect(sweep(state, none, s(100))).toEqual({ state, transitions: [] });
  });

  it('returns the same state object when nothing is due', () => {
    const { state } = run(debounced, [[0, ['f']]]);
    expect(sweep(state, debounced, s(1)).state).toBe(state);
  });
});

describe('transition state', () => {
  it('is plain JSON and drops settled outside zones', () => {
    const { state } = run(none, [
      [0, ['a', 'b']],
      [1, ['b']],
    ]);
    expect(JSON.parse(JSON.stringify(state))).toEqual(state);
    expect(Object.keys(state.zones)).toEqual(['b']);
    expect(state.floorId).toBe(1);
  });

  it('does not mutate the state it is given', () => {
    const { state } = run(debounced, [[0, ['f']]]);
    const copy = structuredClone(state);
    step(state, { zoneIds: [] }, debounced, s(10));
    sweep(state, debounced, s(10));
    expect(state).toEqual(copy);
  });
});

describe('transition step when nothing changes', () => {
  it('hands back the same state object, which is what lets the engine skip re-deriving its stays', () => {
    const inside = run(none, [[0, ['f']]]).state;
    const again = step(inside, { zoneIds: ['f'], floorId: 1 }, none, s(1));
    expect(again.state).toBe(inside);
    expect(again.transitions).toEqual([]);
    const outside = initialTransitionState();
    expect(step({ ...outside, floorId: 1 }, { zoneIds: [], floorId: 1 }, none, s(1)).transitions).toEqual([]);
  });

  it('still moves on when only the set of zones or a pending side differs', () => {
    const inside = run(none, [[0, ['f']]]).state;
    expect(step(inside, { zoneIds: ['f', 'g'], floorId: 1 }, none, s(1)).state).not.toBe(inside);
    expect(step(inside, { zoneIds: ['f'], floorId: 2 }, none, s(1)).state).not.toBe(inside);
    const pending = run(debounced, [[0, ['f']]]).state; // enter waiting for its 5 s dwell
    const confirmed = step(pending, { zoneIds: ['f'], floorId: 1 }, debounced, s(5));
    expect(confirmed.transitions.map((t) => t.type)).toEqual(['enter']);
  });
});

describe('step over many zones', () => {
  it('shares the tracks that did not change with the new state and reads a ZoneIdSet as it is', () => {
    const before = run(new Map(), [[0, ['a', 'b', 'c']]]).state;
    const reads: string[] = [];
    const ids = ['b', 'c', 'd'];
    const zoneIds = {
      size: ids.length,
      has: (zoneId: string) => (reads.push(zoneId), ids.includes(zoneId)),
      [Symbol.iterator]: () => ids[Symbol.iterator](),
    };
    const after = step(before, { zoneIds, floorId: 1 }, new Map(), s(1));
    expect(after.transitions.map((t) => `${t.type} ${t.zoneId}`)).toEqual(['exit a', 'enter d']);
    expect(after.state.zones.b).toBe(before.zones.b);
    expect(after.state.zones.c).toBe(before.zones.c);
    expect(Object.keys(after.state.zones).sort()).toEqual(['b', 'c', 'd']);
    expect(reads).toContain('a'); // membership was asked of the caller's set, not of a copy
  });

  it('gives the same transitions whatever the order of the zone ids, and ignores names inherited by a plain object', () => {
    const state: TransitionState = { floorId: 1, zones: { f: { enteredAt: s(0), pendingSince: null } } };
    const forward = step(state, { zoneIds: ['constructor', 'f', 'g', 'toString'], floorId: 1 }, new Map(), s(1));
    const backward = step(state, { zoneIds: ['toString', 'g', 'f', 'constructor'], floorId: 1 }, new Map(), s(1));
    expect(forward.transitions.map((t) => t.zoneId)).toEqual(['constructor', 'g', 'toString']);
    expect(backward.transitions).toEqual(forward.transitions);
    expect(forward.state.zones.f).toBe(state.zones.f);
  });
});
