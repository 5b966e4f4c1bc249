import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inBoundedTransaction, joinSql, UNBOUNDED } from '../../shared/reports/report-sql.js';
import { SessionWindows, type Run } from '../../shared/reports/session-windows.js';
import { sessionsSql } from '../../shared/reports/stays.js';
import { openStorage, type Storage } from '../../shared/storage/index.js';
import { createTestEnvironment, driverLabel, type TestEnvironment } from '../../testkit/test-environment.js';

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

const FENCE = '00000000-0000-0000-0000-0000000000f1';
const [A, B] = ['00000000-0000-0000-0000-00000000000a', '00000000-0000-0000-0000-00000000000b'];

/** A seeded generator, so a failure replays. */
function random(seed: number) {
  let state = seed >>> 0;
  return () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

/**
 * The join of stay segments into a report's sessions (sessionsSql, in PostgreSQL): segments kept at the stored
 * threshold, cut into hours and per user, give the sessions of the positions for any larger threshold.
 */
describe(`stay segments joined at read time (${driverLabel})`, () => {
  let environment: TestEnvironment;
  let storage: Storage;
  beforeAll(async () => {
    environment = await createTestEnvironment();
    storage = await openStorage(environment.config);
  });
  afterAll(async () => {
    await storage?.close();
    await environment?.cleanup();
  });

  /** Runs of one device in one geofence (µs after the origin) joined by sessionsSql with `threshold` µs. */
  async function joinRuns(runs: Run[], threshold: number): Promise<Run[]> {
    const timing = new SessionWindows(threshold / 1e6, '2026-01-01T00:00:00Z', Number.MAX_SAFE_INTEGER);
    const rows = await inBoundedTransaction(storage, UNBOUNDED, (execute) =>
      execute<{ first_us: string; last_us: string; n: string; user_id: string | null }>(
        joinSql([
          sessionsSql(timing, new Map([[`device\u0000${FENCE}`, runs]])),
          'select ',
          timing.offset('first_ts'),
          ' as first_us, ',
          timing.offset('last_ts'),
          ' as last_us, n, user_id from sessions order by first_ts',
        ]),
      ),
    );
    return rows.map((row) => ({ first: Number(row.first_us), last: Number(row.last_us), n: Number(row.n), user: row.user_id }));
  }

  it('segments of a stored threshold, cut into hours and per user, join into the sessions of any larger threshold', async () => {
    const HOUR = 3600e6;
    for (let seed = 1; seed <= 40; seed++) {
      const next = random(seed);
      const positions: { t: number; user: string | null }[] = [];
      let t = Math.floor(next() * HOUR);
      for (let i = 0; i < 200; i++) {
        t += Math.floor(next() < 0.2 ? next() * 120e6 : next() * 20e6);
        positions.push({ t, user: next() < 0.3 ? null : next() < 0.5 ? A : B });
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
        expect(await joinRuns(segments, threshold), `seed ${seed}, threshold ${threshold}`).toEqual(sessions(positions, threshold));
      }
    }
  });

  it('a gap exactly at the threshold joins, one microsecond over splits', async () => {
    const runs = [
      { first: 0, last: 10, n: 2, user: null },
      { first: 25, last: 30, n: 1, user: A },
      { first: 46, last: 50, n: 1, user: null },
    ];
    expect(await joinRuns(runs, 15)).toEqual([
      { first: 0, last: 30, n: 3, user: A },
      { first: 46, last: 50, n: 1, user: null },
    ]);
  });
});
