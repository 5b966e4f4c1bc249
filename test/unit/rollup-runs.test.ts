import { describe, expect, it } from 'vitest';
import { joinRuns, RUN_GAP_US, type Run } from '../../shared/reports/rollups.js';

/** Sessions straight from positions: sorted, split where consecutive fixes are more than `threshold` apart. */
function sessionsOf(times: number[], threshold: number): Run[] {
  const sorted = [...times].sort((a, b) => a - b);
  const sessions: Run[] = [];
  for (const t of sorted) {
    const last = sessions[sessions.length - 1];
    if (last && t - last.last <= threshold) {
      last.last = t;
      last.n += 1;
    } else sessions.push({ first: t, last: t, n: 1 });
  }
  return sessions;
}

function lcg(seed: number) {
  let state = seed >>> 0;
  return () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

describe('joinRuns', () => {
  it('joins runs of several sources (floors, users, quarters) into the sessions of all their positions', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const random = lcg(seed);
      // A few sources whose fixes interleave, with gaps from 0 to 40 s (ties included).
      const sources = Array.from({ length: 1 + Math.floor(random() * 4) }, () => {
        const times: number[] = [];
        let t = Math.floor(random() * 30e6);
        for (let i = 0; i < 1 + random() * 60; i++) times.push((t += Math.floor(random() * random() * 40e6)));
        return times;
      });
      const all = sources.flat();
      const runs = sources.flatMap((times) => sessionsOf(times, RUN_GAP_US));
      for (const threshold of [RUN_GAP_US, 7_500_000, 15_000_000, 60_000_000]) {
        expect(joinRuns(runs, threshold), `seed ${seed}, threshold ${threshold}`).toEqual(sessionsOf(all, threshold));
      }
    }
  });

  it('a gap equal to the threshold stays inside a session; one µs more splits it', () => {
    const runs = [
      { first: 0, last: 10, n: 2 },
      { first: 15_000_010, last: 15_000_010, n: 1 },
      { first: 30_000_011, last: 30_000_020, n: 3 },
    ];
    expect(joinRuns(runs, 15_000_000)).toEqual([
      { first: 0, last: 15_000_010, n: 3 },
      { first: 30_000_011, last: 30_000_020, n: 3 },
    ]);
  });
});
