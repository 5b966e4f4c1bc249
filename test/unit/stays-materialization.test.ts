import { describe, expect, it } from 'vitest';
import type { Run } from '../../shared/reports/session-windows.js';
import { joinRuns } from '../../shared/reports/stays.js';

/** Sessions of time-ordered positions by definition: a gap over the threshold starts a new one. */
function sessions(positions: { t: number; user: string | null }[], threshold: number): Run[] {
  const out: Run[] = [];
  for (const { t, user } of positions) {
    const last = out[out.length - 1];
    if (last && t - last.last <= threshold) {
      last.last = t;
      last.n += 1;
      if (user !== null && (last.user === null || user > last.user)) last.user = user;
    } else out.push({ first: t, last: t, n: 1, user });
  }
  return out;
}

/** A seeded generator, so a failure replays. */
function random(seed: number) {
  let state = seed >>> 0;
  return () => ((state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

describe('stay segments joined at read time', () => {
  it('segments of a stored threshold, cut into hours and per user, join into the sessions of any larger threshold', () => {
    const HOUR = 3600e6;
    for (let seed = 1; seed <= 200; seed++) {
      const next = random(seed);
      const positions: { t: number; user: string | null }[] = [];
      let t = Math.floor(next() * HOUR);
      for (let i = 0; i < 200; i++) {
        t += Math.floor(next() < 0.2 ? next() * 120e6 : next() * 20e6);
        positions.push({ t, user: next() < 0.3 ? null : next() < 0.5 ? 'a' : 'b' });
      }
      const stored = 15e6;
      // Segments per (hour, user), as the materializer keeps them.
      const groups = new Map<string, typeof positions>();
      for (const p of positions) {
        const key = `${Math.floor(p.t / HOUR)}/${p.user}`;
        groups.set(key, [...(groups.get(key) ?? []), p]);
      }
      const segments = [...groups.values()].flatMap((group) => sessions(group, stored));
      for (const threshold of [stored, 20e6, 30e6, 61e6, 600e6]) {
        expect(joinRuns(segments, threshold), `seed ${seed}, threshold ${threshold}`).toEqual(sessions(positions, threshold));
      }
    }
  });

  it('a gap exactly at the threshold joins, one microsecond over splits', () => {
    const runs = [
      { first: 0, last: 10, n: 2, user: null },
      { first: 25, last: 30, n: 1, user: 'u' },
      { first: 46, last: 50, n: 1, user: null },
    ];
    expect(joinRuns(runs, 15)).toEqual([
      { first: 0, last: 30, n: 3, user: 'u' },
      { first: 46, last: 50, n: 1, user: null },
    ]);
  });
});
