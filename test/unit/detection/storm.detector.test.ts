import { describe, expect, it } from 'vitest';
import { count, emptyTally, isStorm, judge, leave, type StormTally } from '../../../shared/detection/storm.detector.js';

const T0 = Date.UTC(2025, 0, 6, 9, 0, 0);
const tallyOf = (silentSeconds: number[], silenceS = 30): StormTally => {
  const tally = emptyTally();
  for (const seconds of silentSeconds) count(tally, seconds * 1000, silenceS);
  return tally;
};
const due = (...ids: string[]) => new Map(ids.map((id) => [id, `alarm of ${id}`]));

describe('silence storm: tally', () => {
  it('counts the devices heard from within two windows as active, and those quiet for over half a window as quiet', () => {
    expect(tallyOf([0, 14, 15, 16, 31, 60, 61])).toEqual({ active: 6, quiet: 3 });
  });

  it('is a storm with at least 5 quiet and more than half of the active by default; per-building settings change both', () => {
    expect(isStorm({ active: 10, quiet: 5 }, undefined)).toBe(false); // exactly half
    expect(isStorm({ active: 9, quiet: 5 }, undefined)).toBe(true);
    expect(isStorm({ active: 4, quiet: 4 }, undefined)).toBe(false); // fewer than 5
    expect(isStorm({ active: 4, quiet: 4 }, { stormMinDevices: 3 })).toBe(true);
    expect(isStorm({ active: 10, quiet: 5 }, { stormShare: 0.4 })).toBe(true);
    expect(isStorm({ active: 10, quiet: 10 }, { stormShare: 1 })).toBe(false);
  });
});

describe('silence storm: judge and leave', () => {
  it('without a storm, the silence alarms due are raised as they are', () => {
    expect(judge(undefined, { active: 10, quiet: 2 }, due('a', 'b'), undefined, T0)).toEqual({
      storm: undefined,
      started: false,
      joined: [],
      alarms: ['alarm of a', 'alarm of b'],
    });
  });

  it('a storm starts when the tally says so: it holds the alarms due, and those due later join it', () => {
    const first = judge(undefined, { active: 40, quiet: 30 }, due('a', 'b', 'c'), undefined, T0);
    expect(first).toMatchObject({ started: true, joined: ['a', 'b', 'c'], alarms: [] });
    expect(first.storm!.startedAt).toBe(T0);
    const later = judge(first.storm, { active: 40, quiet: 1 }, due('d'), undefined, T0 + 1000);
    expect(later).toMatchObject({ started: false, joined: ['d'], alarms: [] });
    expect([...later.storm!.members.keys()]).toEqual(['a', 'b', 'c', 'd']);
    expect(later.storm!.startedAt).toBe(T0);
    expect(first.storm!.members.size).toBe(3); // pure: the old storm is untouched
  });

  it('nothing due changes nothing', () => {
    const held = judge(undefined, { active: 40, quiet: 30 }, due('a'), { stormMinDevices: 1 }, T0).storm!;
    expect(judge(held, { active: 40, quiet: 30 }, new Map(), undefined, T0 + 1000)).toEqual({
      storm: held,
      started: false,
      joined: [],
      alarms: [],
    });
  });

  it('a member that reports again leaves; anything else leaves the storm as it is', () => {
    const held = judge(undefined, { active: 40, quiet: 30 }, due('a', 'b'), undefined, T0).storm!;
    const left = leave(held, 'a');
    expect([...left.members.keys()]).toEqual(['b']);
    expect(leave(held, 'z')).toBe(held);
  });
});
