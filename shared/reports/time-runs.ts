/**
 * Runs by time, computed in this process from times PostgreSQL sends as text (µs, exact: below 2^53), for the
 * materializations: a run is a stretch of a key's times whose consecutive gaps are at most a
 * threshold, as PostgreSQL's `lag` over `partition by key order by time` would split it. Keys and membership are
 * decided in SQL; this only splits by time, so the kept rows equal what the window functions gave.
 */

/**
 * The numbers of a comma-separated list of non-negative integers below 2^53 (array_to_string of an int array);
 * empty text is none. Read digit by digit: split and Number cost several times as much per number.
 */
export function numbersOf(text: string): number[] {
  const numbers: number[] = [];
  if (text === '') return numbers;
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 44) {
      numbers.push(n);
      n = 0;
    } else n = n * 10 + (c - 48);
  }
  numbers.push(n);
  return numbers;
}

/**
 * Runs per key of `hits`, each a time t (µs, from any origin, t >= 0) and a key k (0 <= k < `base`) as one number
 * t * base + k: a key's time more than `gapUs` after its previous one starts a run. Hits come in time order (the
 * order PostgreSQL reads an index in), else they are sorted first (the number's order is the time's). Equal
 * times may come in any order: no run depends on it. Calls `emit` for each run, in no particular order.
 * `sets`, when given, maps some keys to the keys they stand for (a hit of key k is a hit of each of sets[k] at
 * its time, and k itself is never emitted): every key, and every key of a set, must be below `base`.
 */
export function keyedRuns(
  hits: number[],
  base: number,
  gapUs: number,
  emit: (key: number, first: number, last: number, n: number) => void,
  sets?: ReadonlyArray<ArrayLike<number> | undefined>,
): void {
  let ordered: ArrayLike<number> = hits;
  // A hit below the start of the previous one's time (t * base) has an earlier time. That start is kept as
  // the hits themselves: a hit at least `base` past it starts a later time, whose start is found then.
  for (let i = 0, start = 0; i < hits.length; i++) {
    const hit = hits[i]!;
    if (hit < start) {
      ordered = Float64Array.from(hits).sort();
      break;
    }
    if (hit - start >= base) start = hit - (hit % base);
  }
  // Open runs by key, in arrays rather than a map of objects: a hit costs a few array reads.
  const first = new Float64Array(base);
  const last = new Float64Array(base).fill(-1);
  const count = new Float64Array(base);
  const touched: number[] = [];
  const step = (key: number, t: number) => {
    if (last[key]! < 0) {
      touched.push(key);
      first[key] = t;
      count[key] = 1;
    } else if (t - last[key]! <= gapUs) count[key]!++;
    else {
      emit(key, first[key]!, last[key]!, count[key]!);
      first[key] = t;
      count[key] = 1;
    }
    last[key] = t;
  };
  for (let i = 0; i < ordered.length; i++) {
    const hit = ordered[i]!;
    // Division rather than fmod (slower): exact, as hit < 2^53 makes the quotient below 2^53 / base, whose
    // half ulp is below 1 / base, the least a quotient t + k / base (k < base) lies under t + 1.
    const t = Math.floor(hit / base);
    const key = hit - t * base;
    const set = sets?.[key];
    if (set === undefined) step(key, t);
    else for (let j = 0; j < set.length; j++) step(set[j]!, t);
  }
  for (const key of touched) emit(key, first[key]!, last[key]!, count[key]!);
}

/** `times` if ascending (the order PostgreSQL reads an index in), else a sorted copy. */
export function ascending(times: number[]): ArrayLike<number> {
  for (let i = 1; i < times.length; i++) if (times[i]! < times[i - 1]!) return Float64Array.from(times).sort();
  return times;
}

/**
 * Runs of non-negative times in ascending order within bins of `binUs` from 0: a new bin or a gap over `gapUs`
 * starts one. `emit` gets the bin's start and the run, in time order.
 */
export function binnedRuns(
  times: ArrayLike<number>,
  binUs: number,
  gapUs: number,
  emit: (bin: number, first: number, last: number, n: number) => void,
): void {
  let bin = -1;
  let first = 0;
  let last = 0;
  let n = 0;
  for (let i = 0; i < times.length; i++) {
    const t = times[i]!;
    // fmod is exact on integers, where a quotient rounded up across a bin's start would not be.
    const start = t - (t % binUs);
    if (n > 0 && start === bin && t - last <= gapUs) {
      last = t;
      n++;
    } else {
      if (n > 0) emit(bin, first, last, n);
      bin = start;
      first = last = t;
      n = 1;
    }
  }
  if (n > 0) emit(bin, first, last, n);
}
