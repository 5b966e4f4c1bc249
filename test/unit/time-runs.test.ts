import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ascending, binnedRuns, keyedRuns, numbersOf } from '../../shared/reports/time-runs.js';

type Run = [key: number, first: number, last: number, n: number];

/** What `lag(t) over (partition by key order by t)` and a running sum of "gap over the threshold" give. */
function windowRuns(hits: { t: number; key: number }[], gapUs: number, keyOf: (hit: { t: number; key: number }) => number): Run[] {
  const sorted = [...hits].sort((a, b) => keyOf(a) - keyOf(b) || a.t - b.t);
  const runs: Run[] = [];
  sorted.forEach((hit, i) => {
    const previous = sorted[i - 1];
    const run = runs[runs.length - 1];
    if (previous && keyOf(previous) === keyOf(hit) && hit.t - previous.t <= gapUs) {
      run![2] = hit.t;
      run![3]++;
    } else runs.push([keyOf(hit), hit.t, hit.t, 1]);
  });
  return runs;
}

const byStart = (runs: Run[]) => [...runs].sort((a, b) => a[0] - b[0] || a[1] - b[1]);

/** Times of an hour in µs with gaps around the thresholds (equal, one µs over), ties, and whole quarters. */
const time = fc.oneof(
  fc.integer({ min: 0, max: 3_600_000_000 - 1 }),
  fc.constantFrom(0, 5_000_000, 5_000_001, 15_000_000, 15_000_001, 899_999_999, 900_000_000, 900_000_001, 1_800_000_000, 3_599_999_999),
);
const hitsArbitrary = fc.array(fc.record({ t: time, key: fc.integer({ min: 1, max: 6 }) }), { maxLength: 80 });

describe('time runs (the materializer splits runs in this process: as the window functions did)', () => {
  it('numbersOf reads array_to_string of non-negative integers below 2^53', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.nat(), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }))), (numbers) => {
        expect(numbersOf(numbers.join(','))).toEqual(numbers);
      }),
    );
  });

  it('keyedRuns: per key, a gap over the threshold starts a run, in any arrival order', () => {
    fc.assert(
      fc.property(
        hitsArbitrary,
        fc.constantFrom(15_000_000, 5_000_000, 0),
        fc.boolean(),
        fc.constantFrom(7, 1_001, 2_000_000),
        (hits, gapUs, inOrder, base) => {
          // In time order as an index gives them (keys of one time in any order), or shuffled.
          const arriving = inOrder ? [...hits].sort((a, b) => a.t - b.t) : hits;
          const runs: Run[] = [];
          keyedRuns(
            arriving.map((hit) => hit.t * base + hit.key),
            base,
            gapUs,
            (key, first, last, n) => runs.push([key, first, last, n]),
          );
          expect(byStart(runs)).toEqual(byStart(windowRuns(hits, gapUs, (hit) => hit.key)));
        },
      ),
    );
  });

  it('keyedRuns with sets: a hit of a set is a hit of each of its keys at its time', () => {
    // Keys 1-6 are shapes; 7, 8 and 9 stand for sets of them (as a cell's covering shapes do).
    const sets = [undefined, undefined, undefined, undefined, undefined, undefined, undefined, [1, 2], [3], [2, 5, 6]];
    const base = 10;
    fc.assert(
      fc.property(
        fc.array(fc.record({ t: time, key: fc.integer({ min: 1, max: 9 }) }), { maxLength: 80 }),
        fc.constantFrom(15_000_000, 5_000_000, 0),
        fc.boolean(),
        (hits, gapUs, inOrder) => {
          const arriving = inOrder ? [...hits].sort((a, b) => a.t - b.t) : hits;
          const runs: Run[] = [];
          keyedRuns(
            arriving.map((hit) => hit.t * base + hit.key),
            base,
            gapUs,
            (key, first, last, n) => runs.push([key, first, last, n]),
            sets,
          );
          const expanded = hits.flatMap((hit) => (sets[hit.key] ?? [hit.key]).map((key) => ({ t: hit.t, key })));
          expect(byStart(runs)).toEqual(byStart(windowRuns(expanded, gapUs, (hit) => hit.key)));
        },
      ),
    );
  });

  it('binnedRuns: runs of one key split at quarter hours and at gaps over the threshold', () => {
    fc.assert(
      fc.property(fc.array(time, { maxLength: 80 }), (times) => {
        const runs: Run[] = [];
        binnedRuns(ascending(times), 900_000_000, 5_000_000, (bin, first, last, n) => runs.push([bin, first, last, n]));
        const expected = windowRuns(
          times.map((t) => ({ t, key: 0 })),
          5_000_000,
          (hit) => Math.floor(hit.t / 900_000_000) * 900_000_000,
        );
        expect(runs).toEqual(byStart(expected));
      }),
    );
  });

  it('keyedRuns reads the time and key of hits near 2^53 exactly (the last µs of an hour, the largest keys)', () => {
    const base = 2_000_000;
    const hits: { t: number; key: number }[] = [];
    for (const t of [3_599_999_999, 3_599_999_998, 1_000_000_000_001 % 3_600_000_000, 2 ** 31 + 7])
      for (const key of [base - 1, base - 2, 1, 0]) hits.push({ t, key });
    hits.sort((a, b) => a.t - b.t);
    const runs: Run[] = [];
    keyedRuns(
      hits.map((hit) => hit.t * base + hit.key),
      base,
      0,
      (key, first, last, n) => runs.push([key, first, last, n]),
    );
    expect(byStart(runs)).toEqual(byStart(windowRuns(hits, 0, (hit) => hit.key)));
  });

  it('a gap equal to the threshold stays inside a run; one µs more splits it', () => {
    const runs: Run[] = [];
    keyedRuns(
      [0, 15_000_000, 30_000_001].map((t) => t * 3 + 1),
      3,
      15_000_000,
      (key, first, last, n) => runs.push([key, first, last, n]),
    );
    expect(runs).toEqual([
      [1, 0, 15_000_000, 2],
      [1, 30_000_001, 30_000_001, 1],
    ]);
  });
});
